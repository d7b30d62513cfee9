"""Local models: the catalogue (:mod:`rune.models.catalog`), ``rune pull``
(:mod:`rune.models.pull`) and the embedded llama.cpp server (:mod:`rune.models.embedded`)."""

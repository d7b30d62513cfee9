"""How a tool call is written as text: the text fallback's prompt and parser
(:mod:`rune.formats.fallback`) and the grammar-constrained turn (:mod:`rune.formats.constrained`).
The runtime's protocol strategies (:mod:`rune.runtime.protocols`) speak through them."""

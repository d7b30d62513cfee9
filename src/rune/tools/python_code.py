"""What the file tools know about Python: whether a change leaves a file that parses, what a
whole-file rewrite drops, and where a function's definition starts and ends.

Small models fix code best one function at a time (they rewrite the function whole, which
keeps the rest of the file out of their hands), and they break files in two ways that are
easy to see before anything is written: a change that no longer parses, and a whole-file
rewrite that leaves out functions it was not asked to touch. Both are refused here with the
reason, so the model can correct itself, whatever the protocol and whatever the approval mode.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass
from pathlib import Path

from rune.errors import (
    InvalidCode,
    MissingBody,
    OtherDefinition,
    ToolError,
    ToolInputError,
    VariableNotFunction,
)
from rune.tools.display import for_display

PYTHON_SUFFIXES = frozenset({".py", ".pyi"})
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def is_python(path: Path) -> bool:
    return path.suffix in PYTHON_SUFFIXES


def syntax_problem(text: str, name: str = "<file>") -> str | None:
    """None when ``text`` parses as Python, else ``line N: message: `the line```."""
    try:
        ast.parse(text, filename=name)
    except SyntaxError as err:
        line = (err.text or "").rstrip("\n")
        shown = f": `{for_display(line.strip(), keep='')}`" if line.strip() else ""
        return f"line {err.lineno}: {err.msg}{shown}"
    except (ValueError, RecursionError, MemoryError) as err:
        return f"{type(err).__name__}: {err}"
    return None


def _decode(data: bytes | None) -> str | None:
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def check_change(path: Path, before: bytes | None, after: bytes, *, whole_file: bool) -> None:
    """Refuse a change to a Python file that breaks it. A file that did not parse before may
    be changed freely (the change may be the fix); a new file must parse. ``whole_file``: the
    change replaces the file, so it must keep every top-level function and class."""
    if not is_python(path):
        return
    old, new = _decode(before), _decode(after)
    if new is None or (before is not None and (old is None or syntax_problem(old) is not None)):
        return
    shown = for_display(path.name, keep="")
    problem = syntax_problem(new, path.name)
    if problem is not None:
        raise ToolError(
            f"the change would leave {shown} with invalid Python ({problem}); nothing was "
            "changed. Send the complete, corrected code."
        )
    if whole_file and old is not None:
        dropped = sorted(top_level_names(old) - top_level_names(new))
        if dropped:
            listed = ", ".join(dropped)
            raise ToolError(
                f"the new content of {shown} leaves out {listed}, which the file defines now; "
                "nothing was changed. write_file replaces the whole file, so send all of it, "
                "or change one function with replace_function (to delete a function on "
                "purpose, use edit_file)."
            )


def top_level_names(text: str) -> set[str]:
    """The functions and classes a module defines at its top level, as ``name()``/``class``."""
    names: set[str] = set()
    for node in ast.parse(text).body:
        if isinstance(node, ast.ClassDef):
            names.add(f"class {node.name}")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(f"{node.name}()")
    return names


# --- replacing one definition -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Span:
    """Lines ``start``..``end`` (1-based, inclusive) of a definition, decorators included."""

    start: int
    end: int


def replace_definition(path: Path, source: str, name: str, code: str) -> str:
    """``source`` with the definition called ``name`` replaced by ``code`` (or, when the file
    has none, ``code`` added at its end). ``name`` is ``function``, ``Class`` or
    ``Class.method``. Raises ToolError/ToolInputError with what to send instead."""
    shown = for_display(path.name, keep="")
    name = name.strip()
    if not name or not all(part.isidentifier() for part in name.split(".")):
        raise ToolInputError(
            f"name must be a function or class name such as `add` or `Calc.add`, got {name!r}"
        )
    problem = syntax_problem(source, path.name)
    if problem is not None:
        raise ToolError(
            f"{shown} does not parse now ({problem}), so its functions cannot be found; fix "
            "it with edit_file or write_file."
        )
    block, imports = _imports_apart(_normalised(code, name.rsplit(".", 1)[-1], source))
    if imports:
        # The imports a model puts above the function go with the file's own, once: left in
        # the block they would land above the definition, and again at each resend (the 1.5B
        # sent the same function with its import four times; each added one more line).
        return _with_imports(replace_definition(path, source, name, block), imports)
    tree = ast.parse(source)
    spans = _find(tree, name)
    lines = source.splitlines(keepends=True)
    if len(spans) > 1:
        raise ToolInputError(
            f"{name} is defined {len(spans)} times in {shown}; name the one you mean as "
            "Class.method."
        )
    if not spans:
        if "." in name:
            raise ToolError(f"{shown} has no {name}; give an existing Class.method, or a name.")
        variable = _variable_of(tree, name)
        if variable is not None:
            # The 1.5B sent `def indegree(node): ...` for the dict `indegree` inside
            # `topological_order`, in every run of that task: added at the end, the function
            # would never be called from there, and it stayed in the file when the run ended.
            owner, line = variable
            raise VariableNotFunction(
                f"{shown} has no function {name}: `{name}` is a variable in {owner} (line "
                f"{line}), and a new function by that name would not change what {owner} "
                f"does. To change it, send the whole definition of {owner}.",
                owner,
            )
        head = "".join(lines).rstrip("\n")
        return (head + "\n\n\n" if head else "") + block
    span = spans[0]
    short = name.rsplit(".", 1)[-1]
    present = textwrap.dedent("".join(lines[span.start - 1 : span.end]))
    if _bodiless(block, short) and not _bodiless(present, short):
        # A small model that runs short sends the signature and docstring alone; taken as it
        # is, that would delete the function's code.
        raise MissingBody(
            f"code for {name} has no body (only a docstring, pass or ...); send the whole "
            f"definition of {name}, its body included.",
            source.encode("utf-8"),
        )
    block = _keep_docstring(block, present, short)
    first = lines[span.start - 1]
    indent = first[: len(first) - len(first.lstrip(" \t"))]
    indented = "".join(
        indent + line if line.strip() else line for line in block.splitlines(keepends=True)
    )
    return "".join(lines[: span.start - 1]) + indented + "".join(lines[span.end :])


def write_definitions(path: Path, source: str | None, code: str) -> str:
    """``source`` with every definition ``code`` holds written in: each replaces the
    definition of its name (a method, when only a class has one by that name) or is added at
    the end, and the imports ``code`` adds go after the file's own. ``code`` that also holds
    other module-level statements is the complete file only when it keeps every top-level
    definition ``source`` has; otherwise it is refused with what to send instead. With no
    ``source`` (a new file) ``code`` is the file."""
    block = textwrap.dedent(code.replace("\r\n", "\n")).strip("\n") + "\n"
    problem = syntax_problem(block)
    if problem is not None:
        raise InvalidCode(
            f"code is not valid Python on its own ({problem}); send whole definitions, each "
            "from its `def` (or `class`) line to its last line.",
            code,
            problem,
        )
    if source is None:
        return block
    shown = for_display(path.name, keep="")
    problem = syntax_problem(source, path.name)
    if problem is not None:
        raise ToolError(
            f"{shown} does not parse now ({problem}), so its functions cannot be found; send "
            "the complete file instead."
        )
    tree = ast.parse(block)
    body = [n for n in tree.body if not _is_docstring(n)]
    definitions = [n for n in body if isinstance(n, _DEFINITIONS)]
    others = [n for n in body if not isinstance(n, (*_DEFINITIONS, ast.Import, ast.ImportFrom))]
    if others:
        if top_level_names(source) <= top_level_names(block):
            return block  # the complete file, sent whole
        raise ToolError(
            f"code holds statements other than whole definitions and imports (line "
            f"{others[0].lineno}) but leaves out some of {shown}; send whole functions or "
            "classes only, or the complete file."
        )
    if not definitions:
        raise ToolInputError("code defines no function or class; send whole definitions.")
    lines = block.splitlines(keepends=True)
    result = source
    for node in definitions:
        for name, member in _members_to_write(source, node):
            span = _span(member)
            result = replace_definition(
                path, result, name, "".join(lines[span.start - 1 : span.end])
            )
    return _with_imports(result, [n for n in body if isinstance(n, ast.Import | ast.ImportFrom)])


def _members_to_write(source: str, node: Definition) -> list[tuple[str, Definition]]:
    """What a definition in a block replaces: itself, or, for a class the file has whose block
    leaves out some of its methods (a model sends the class with the one method it changed),
    each method it holds, one by one, so the others stay."""
    if not isinstance(node, ast.ClassDef):
        return [(node.name, node)]
    present = [n for n in ast.parse(source).body if _named(n, node.name)]
    if len(present) != 1 or not isinstance(present[0], ast.ClassDef):
        return [(node.name, node)]
    members = [n for n in node.body if not _is_docstring(n)]
    if not all(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) for n in members):
        return [(node.name, node)]
    had = {n.name for n in present[0].body if isinstance(n, _DEFINITIONS)}
    if had <= {n.name for n in members if isinstance(n, _DEFINITIONS)}:
        return [(node.name, node)]
    return [(f"{node.name}.{n.name}", n) for n in members if isinstance(n, _DEFINITIONS)]


def _imports_apart(block: str) -> tuple[str, list[ast.Import | ast.ImportFrom]]:
    """``block`` without its top-level imports, and those imports."""
    tree = ast.parse(block)
    imports = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    if not imports:
        return block, []
    lines = block.splitlines(keepends=True)
    dropped = {k for n in imports for k in range(n.lineno - 1, n.end_lineno or n.lineno)}
    kept = "".join(line for k, line in enumerate(lines) if k not in dropped)
    return kept.strip("\n") + "\n", imports


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)


def _with_imports(source: str, imports: list[ast.Import | ast.ImportFrom]) -> str:
    """``source`` with those of ``imports`` it lacks added after its last top-level import
    (or its docstring, or at the top)."""
    tree = ast.parse(source)
    present = {ast.unparse(n) for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)}
    missing = [
        text for text in dict.fromkeys(ast.unparse(n) for n in imports) if text not in present
    ]
    if not missing:
        return source
    after = 0
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom) or (after == 0 and _is_docstring(node)):
            after = node.end_lineno or node.lineno
        elif after:
            break
    lines = source.splitlines(keepends=True)
    added = "".join(f"{text}\n" for text in missing)
    return "".join(lines[:after]) + added + "".join(lines[after:])


def contract_of(source: str, name: str) -> str | None:
    """``source`` with the body of the function ``name`` (``function`` or ``Class.method``)
    left out: its signature and docstring kept, ``...`` in place of its code. None when the
    file does not parse, has no such function or more than one, or it has no docstring or no
    code beyond it (nothing would be left to say what it must do, or nothing to hide)."""
    node = _function(source, name)
    if node is None or len(node.body) < 2 or ast.get_docstring(node, clean=False) is None:
        return None
    doc_end, code = node.body[0].end_lineno or node.body[0].lineno, node.body[1]
    if code.lineno <= doc_end:
        return None  # code on the docstring's own line: nothing to cut cleanly
    lines = source.splitlines(keepends=True)
    first = lines[code.lineno - 1]
    indent = first[: len(first) - len(first.lstrip(" \t"))]
    end = node.end_lineno or node.lineno
    return "".join([*lines[:doc_end], f"{indent}...\n", *lines[end:]])


def local_contract_of(source: str, name: str) -> str | None:
    """The contract of the function ``name`` (:func:`contract_of`) in the part of ``source``
    it needs (:func:`local_view_of`), for a module too long to show whole (a library's runs to
    thousands of lines). None as for :func:`contract_of`, and for a function nested in
    another."""
    view = local_view_of(source, name)
    return contract_of(view[0], view[1]) if view is not None else None


def local_view_of(source: str, name: str) -> tuple[str, str] | None:
    """The part of ``source`` the function ``name`` needs to be read alone, and its qualified
    name there: the module's imports, then the function (a method under its class's first
    line). None when ``source`` does not parse, has no such function or more than one, or it is
    nested in a function."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    found = _definitions(tree, name)
    if len(found) != 1 or not isinstance(found[0], (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    node = found[0]
    named = _walk_definitions(tree.body)
    qualified = next(q for q, n in named if n is node)
    owner_name = qualified.rpartition(".")[0]
    lines = source.splitlines(keepends=True)
    parts = ["".join(lines[n.lineno - 1 : n.end_lineno]) for n in tree.body if _imports(n)]
    if owner_name:
        owner = next(n for q, n in named if q == owner_name)
        if not isinstance(owner, ast.ClassDef) or "." in owner_name:
            return None  # nested in a function (or a class in one): no contract stands alone
        parts.append("\n\n" + "".join(lines[owner.lineno - 1 : owner.body[0].lineno - 1]))
    else:
        parts.append("\n\n")
    span = _span(node)
    parts.append("".join(lines[span.start - 1 : span.end]))
    return "".join(parts), qualified


def _imports(node: ast.stmt) -> bool:
    return isinstance(node, (ast.Import, ast.ImportFrom))


def code_of(source: str, name: str) -> str | None:
    """What the function ``name`` in ``source`` does, as a comparable string: its arguments
    and its statements but the docstring, without comments or layout. None when ``source``
    does not define exactly one function by that name."""
    node = _function(source, name)
    if node is None:
        return None
    body = node.body[1:] if ast.get_docstring(node, clean=False) is not None else node.body
    return ast.dump(node.args) + "".join(ast.dump(stmt) for stmt in body)


def is_stub(source: str, name: str) -> bool:
    """Whether the function ``name`` of ``source`` does nothing yet: beyond its docstring, only
    ``pass``, ``...`` or ``raise NotImplementedError`` (a spec's stub, whose docstring is the
    task itself)."""
    node = _function(source, name)
    return node is not None and all(_placeholder(stmt) for stmt in node.body)


def _placeholder(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.Pass):
        return True
    if isinstance(stmt, ast.Expr):
        return isinstance(stmt.value, ast.Constant)  # a docstring, or ``...``
    if isinstance(stmt, ast.Raise) and stmt.exc is not None:
        raised = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
        return isinstance(raised, ast.Name) and raised.id == "NotImplementedError"
    return False


def _function(source: str, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The one function ``name`` (``function`` or ``Class.method``) of ``source``, or None;
    ``source`` may be a definition alone, indented as in its class."""
    try:
        tree = ast.parse(textwrap.dedent(source))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    found = _definitions(tree, name)
    if not found and "." in name:  # the definition alone, as a call sends it
        found = _named_in(tree.body, name.rsplit(".", 1)[-1])
    if len(found) != 1 or not isinstance(found[0], (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    return found[0]


def _normalised(code: str, short_name: str, source: str) -> str:
    """``code`` dedented, ending in one newline, and checked to define ``short_name`` (the
    definition it replaces in ``source``)."""
    block = textwrap.dedent(code.replace("\r\n", "\n")).strip("\n") + "\n"
    problem = syntax_problem(block)
    if problem is not None:
        raise InvalidCode(
            f"code is not valid Python on its own ({problem}); send the whole definition, "
            f"starting with `def {short_name}(` or `class {short_name}`.",
            code,
            problem,
        )
    defined = {n.name for n in ast.parse(block).body if isinstance(n, _DEFINITIONS)}
    if short_name not in defined:
        raise OtherDefinition(
            f"code must be the complete new definition of {short_name}, starting with "
            f"`def {short_name}(` (or `class {short_name}`); it defines "
            f"{', '.join(sorted(defined)) or 'nothing'}.",
            source.encode("utf-8"),
        )
    return block


def defined_inside(code: str, name: str) -> bool:
    """Whether ``code`` defines ``name`` (``method`` or ``Class.method``) only inside one of
    its classes, not at its top level: a small model that sends a class to change one of its
    methods names the method (the 1.5B: ``name="__init__"``, code ``class Turnstile: ...``)."""
    short = name.rsplit(".", 1)[-1]
    try:
        tree = ast.parse(textwrap.dedent(code.replace("\r\n", "\n")))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    top = [n for n in tree.body if isinstance(n, _DEFINITIONS)]
    if any(n.name == short for n in top):
        return False
    return any(isinstance(n, ast.ClassDef) and any(_named(m, short) for m in n.body) for n in top)


def _keep_docstring(block: str, present: str, name: str) -> str:
    """``block`` with the docstring of the definition it replaces (``present``) when its own
    definition of ``name`` has none. A small model rewriting a function drops its docstring
    (the 1.5B did to inflection's ``ordinal``, and lost the examples that show its bug); the
    user's documentation is not the model's to delete by leaving it out."""
    old, new = _definition_in(present, name), _definition_in(block, name)
    if old is None or new is None or not old.body or not new.body:
        return block
    doc, first = old.body[0], new.body[0]
    if not _is_docstring(doc) or _is_docstring(first) or first.lineno == new.lineno:
        return block
    had = present.splitlines(keepends=True)
    lines = block.splitlines(keepends=True)
    if any(line.lstrip().startswith("#") for line in lines[new.lineno : first.lineno - 1]):
        return block  # the model wrote its documentation as comments there: it is its own
    old_indent, new_indent = (
        had[doc.lineno - 1][: doc.col_offset],
        lines[first.lineno - 1][: first.col_offset],
    )
    end = doc.end_lineno or doc.lineno
    alone = had[end - 1].encode()[doc.end_col_offset or 0 :].strip() == b""  # offsets: bytes
    if old_indent.strip() or new_indent.strip() or not alone:
        return block  # the docstring or the first statement shares its line with other code
    moved = [
        new_indent + line[len(old_indent) :] if line.startswith(old_indent) else line
        for line in had[doc.lineno - 1 : end]
    ]
    return "".join([*lines[: first.lineno - 1], *moved, *lines[first.lineno - 1 :]])


def _definition_in(code: str, name: str) -> Definition | None:
    for node in ast.parse(code).body:
        if isinstance(node, _DEFINITIONS) and node.name == name:
            return node
    return None


def _bodiless(code: str, name: str) -> bool:
    """Whether ``code``'s definition of ``name`` holds nothing but a docstring, ``pass`` or
    ``...``."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return False
    for node in tree.body:
        if _named(node, name):
            assert isinstance(node, _DEFINITIONS)
            return all(
                isinstance(stmt, ast.Pass)
                or (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant))
                for stmt in node.body
            )
    return False


def _find(tree: ast.Module, name: str) -> list[Span]:
    """Where ``name`` is defined (see ``_definitions``)."""
    return [_span(n) for n in _definitions(tree, name)]


def _definitions(tree: ast.Module, name: str) -> list[Definition]:
    """The definitions ``name`` stands for: ``Owner.member`` among its owner's members;
    a plain name at the top level first, else anywhere (methods, nested)."""
    if "." in name:
        owner, _, member = name.rpartition(".")
        holders = [n for qualified, n in _walk_definitions(tree.body) if qualified == owner]
        return [n for h in holders for n in _named_in(h.body, member)]
    top = _named_in(tree.body, name)
    if top:
        return top
    return [n for _, n in _walk_definitions(tree.body) if n.name == name]


def _variable_of(tree: ast.Module, name: str) -> tuple[str, int] | None:
    """The function (dotted, as ``Class.method``) that assigns ``name`` as one of its own
    variables, and the line, or None. A parameter does not count (a new function of that name
    may be what callers pass for it), nor a name the function declares ``global``."""
    for qualified, node in _walk_definitions(tree.body):
        if isinstance(node, ast.ClassDef):
            continue
        inner = [n for stmt in node.body for n in ast.walk(stmt)]
        if any(isinstance(n, ast.Global | ast.Nonlocal) and name in n.names for n in inner):
            continue
        for n in inner:
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id == name:
                return qualified, n.lineno
    return None


def _named_in(body: list[ast.stmt], name: str) -> list[Definition]:
    return [n for n in body if isinstance(n, _DEFINITIONS) and n.name == name]


def _named(node: ast.stmt, name: str) -> bool:
    return isinstance(node, _DEFINITIONS) and node.name == name


Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def _walk_definitions(body: list[ast.stmt], prefix: str = "") -> list[tuple[str, Definition]]:
    """Every definition in ``body``, nested ones too, with its dotted name (``Class.method``)."""
    found: list[tuple[str, Definition]] = []
    for node in body:
        if isinstance(node, _DEFINITIONS):
            found.append((prefix + node.name, node))
            found.extend(_walk_definitions(node.body, prefix + node.name + "."))
    return found


def _span(node: ast.stmt) -> Span:
    assert isinstance(node, _DEFINITIONS)
    start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    return Span(start, node.end_lineno or node.lineno)

"""Helpers for the error catalogue: find a marked line, read an error's full text."""

import inspect
import os


def line_of(fn, marker: str) -> int:
    """The line number of the line in `fn`'s source that ends with `# <marker>`."""
    lines, first = inspect.getsourcelines(inspect.unwrap(fn))
    hits = [first + i for i, line in enumerate(lines) if line.rstrip().endswith(f"# {marker}")]
    assert len(hits) == 1, f"marker {marker!r} found {len(hits)} times"
    return hits[0]


def full_text(exc: BaseException) -> str:
    return "\n".join([str(exc), *getattr(exc, "__notes__", [])])


def assert_points_at(exc: BaseException, fn, marker: str, *keywords: str) -> None:
    """The error names fn's file and the marked line (with its source), and says `keywords`."""
    text = full_text(exc)
    filename = inspect.getsourcefile(inspect.unwrap(fn))
    line = line_of(fn, marker)
    assert f'File "{filename}", line {line}' in text, f"expected {os.path.basename(filename)}:{line} in:\n{text}"
    source = inspect.getsourcelines(inspect.unwrap(fn))
    source_line = source[0][line - source[1]].strip()
    assert source_line in text, f"expected the source line {source_line!r} in:\n{text}"
    for word in keywords:
        assert word.lower() in text.lower(), f"expected {word!r} in:\n{text}"

"""Run one transformer alone on a snippet and print the result (golden tests)."""

import ast
import textwrap

from dy2st import analysis
from dy2st.conversion import to_source
from dy2st.transformers.base import ConversionContext
from dy2st.transformers.naming import Namer


def transform_snippet(source: str, *modules, needs_analysis=True) -> str:
    tree = ast.parse(textwrap.dedent(source))
    namer = Namer.for_tree(tree)
    ctx = ConversionContext("<snippet>", "f", namer, "jst")
    for module in modules:
        if needs_analysis:
            analysis.resolve(tree)
        tree = module.transform(tree, ctx)
    return to_source(tree.body[0]).strip()


def dedent(text: str) -> str:
    return textwrap.dedent(text).strip()

"""Static analysis of the parsed function: facts attached to nodes, read by transformers.

`resolve(tree)` runs every analysis in dependency order. The pipeline re-runs it before each
transformer that declares it needs fresh facts, so no transformer derives them itself.
"""

from dy2st.analysis import activity, definitions, liveness
from dy2st.analysis.anno import Fact, getanno, hasanno, setanno
from dy2st.analysis.qual_names import QualifiedName


def resolve(tree) -> None:
    activity.resolve(tree)
    liveness.resolve(tree)
    definitions.resolve(tree)


__all__ = ["Fact", "QualifiedName", "getanno", "hasanno", "resolve", "setanno"]

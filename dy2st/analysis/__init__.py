"""Static analysis of the parsed function: facts attached to nodes, read by transformers.

`resolve(tree)` runs every analysis in dependency order (or those a step asks for: `SCOPES`,
`LIVENESS`). The pipeline re-runs it before each transformer that declares it needs fresh
facts, so no transformer derives them itself.
"""

from dy2st.analysis import activity, definitions, liveness
from dy2st.analysis.anno import Fact, getanno, hasanno, setanno
from dy2st.analysis.qual_names import QualifiedName


# What a step may ask for (`transformers.Step.needs_analysis`), each with what it builds on.
SCOPES = (activity,)  # ACTIVITY, SCOPE
LIVENESS = (activity, liveness)  # and LIVE_IN, LIVE_OUT, BODY_LIVE_IN
DEFINITIONS = (activity, definitions)  # and DEFINED_IN
ALL = (activity, liveness, definitions)  # and DEFINED_IN


def resolve(tree, analyses=ALL) -> None:
    for analysis in analyses:
        analysis.resolve(tree)


__all__ = ["Fact", "QualifiedName", "getanno", "hasanno", "resolve", "setanno"]

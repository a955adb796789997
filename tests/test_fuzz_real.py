"""The second differential fuzzer in CI: programs shaped like real code (lists, dicts, iterators,
closures, stateful objects, try/finally/with, builtins, zero-trip loops) either give eager's
result exactly (values, dtypes, structure, gradients, caller-visible side effects) or are refused
clearly. A seeded slice runs here; `python -m dy2st.testing.fuzz --generator real` runs a campaign.

Programs of a bug class still open are listed in XFAIL with the class as the reason; the xfail
is strict, so a fix makes the test fail until the program is removed from the list.
"""

import dataclasses
import os
import re

import numpy as np
import pytest

from dy2st.testing import fuzz
from dy2st.testing.fuzz import RealOutcome
from dy2st.testing.real_program_gen import (MODELS_LAST_KINDS, MODELS_LATE_KINDS, PRELUDE, RealProgram, draw_models_kind,
                                            draw_program)

# Programs campaigns found wrong or crashing, each fixed since (kept so their class stays fixed):
# a list made before a traced loop popped in it (6220, 6451), dict.update in a traced loop (7110),
# a context manager's list around a staged if (6896) or in iterations a traced break may skip
# (8120), list.index over traced values (6434), an inner if's item write unseen by the outer if
# (6828), a loop body failing half way under grad (7085), a nonlocal writer under a traced
# continue (7813), a read no path assigned (8154, 10065, 21100, 21276, 26617, 22829), a closure reading a write made in staged code (28426), an untaken staged branch raising while traced (44501), and the 5000-5599 campaign's (5038, 5042,
# 5093, 5151, 5301, 5353, 5376, 5540). Drawn by the generator as it is now (seeds before 90000
# drew other programs): a Python int carried by a zero-trip while whose body sets a bool (97426),
# a scalar whose dtype eager picks by data, under jit (90460). The generator has grown since
# (kinds 36-37: an int-or-array choice times an array, int() of one), so these seeds now draw
# other programs too; the classes they found are pinned by tests/regressions and tests/fidelity.
# Drawn by the generator as it is now: an int-or-float choice computed on, returned and stored
# in a dict (90041, 90633: refused), a float carry the body makes an int, read after a loop with
# a traced trip count (95669). Kind 38 (an int-or-array choice an inner staged if assigns as it
# is): a false refusal, "the branches give different types each time they are traced" (113, 196).
# An int-or-array choice carried into a scan as its start lost its kind (250318); a Python int
# start picked again by max() in a loop with a traced trip count (280427: refused now).
# Stop 44: a MaybeUnbound meeting a value past a `continue` (its flag's zeros, 6104838: was a raw
# error); a helper's nonlocal write after a staged raise (6200887) and a nested if appending
# through an alias (6000248): were tracer leaks, refused now. A value past a `break` (a DeadValue)
# read after the loop raised with no line (6202835). Stop 45: a print in a staged `if` after a
# Python number divided by a loop-decided 0 still showed (6300169); a random draw in a scan tried
# and given up for an unroll was made twice, shifting every later draw (6800246).
CAMPAIGN_SEEDS = (5038, 5042, 5093, 5151, 5301, 5353, 5376, 5540, 6220, 6434, 6451, 6828, 6896, 7085,
                  7110, 7813, 8120, 8154, 10065, 21100, 21276, 26617, 22829, 28426, 44501, 90460, 97426,
                  90041, 90633, 95669, 113, 196, 160050, 160076, 170325, 200109, 200157, 230149, 250318,
                  280427, 68, 200, 380, 4502911, 4700429, 4700557, 4501890, 4701653, 4702852,
                  257, 315, 474, 5100477, 5200154, 416, 635, 9000044, 9000130, 9000060, 9000246, 9000156,
                  5500155, 5500330, 5500552, 9200898, 6104838, 6200887, 6000248, 6202835,
                  6300169, 6800246)
FAST_SEEDS = (*range(0, 60), *CAMPAIGN_SEEDS)
SLOW_SEEDS = range(60, 400)
# Seeds of a bug class still open, with the class as the reason (E: see below). Classes fixed so
# far: effects of methods/context managers/calls on lists in staged loops and ifs (A, C, G, I),
# tracer leaks through caller-visible state (B), sorted()/index() over traced scalars (D), a user's
# exception class whose module is not in sys.modules raised while tracing (E, seed 33); an outside
# change a trace made before eager's own exception, put back so the call runs eagerly (K), a default
# list reached as `_bag.__defaults__[0]` and returned (M), an UnboundLocalError after an effect (N).
# An exception decided when the program runs (the numbers rule's ZeroDivisionError, a `finally`
# returning on array data or not) lost the changes made before it (O, seeds 68, 200): the call
# now runs eagerly after such a failure. `next()` of a module iterator that ran out while tracing
# (L, seeds 380, 6451) lost them too: a trace given up could not rewind an iterator that ran out
# (it drops its sequence), so the call could not run again eagerly; it now gives it back.
# A Python bool the data decides compared with `is True` was never True, and a float's `repr` was
# an array's (seeds 257, 315, 474, 19: the `flags-<seed>` stream). A list changed by `heapq`,
# `bisect` or `operator.iadd` in a staged side got both sides' changes (416, 635: `libs-<seed>`).
# The `lazy-<seed>` stream: a staged if's assignment before a raise that `except ValueError`
# catches was dropped (9000044: a wrong array after the try) or left unbound while traced
# (9000130: a raw UnboundLocalError in a loop); a defaultdict's missing key read in a staged side
# was added whatever the data said (9000060: refused now); a helper's own call counter
# (`_counted.calls += 1`) bumped by a trace given up kept that bump when the call ran eagerly
# after eager's ValueError (9000246: two calls counted for one). The right side of a staged `or`
# that changes a list was neither refused nor run (9000156: the second side traced found no roots).
# A `with` whose body raises (an `__exit__` may suppress it) left the statements nested after it
# without the definitions analysis' facts: a raw KeyError under jit (5500155, 5500330, 5500552).
XFAIL: dict[int, str] = {}


def _params(seeds):
    for seed in seeds:
        reason = XFAIL.get(seed)
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        yield pytest.param(seed, marks=marks, id=f"seed{seed}")


def _check(seed):
    program = draw_program(seed)
    result = fuzz.run_real_program(program)
    assert result.outcome in (RealOutcome.MATCH, RealOutcome.REFUSAL), (
        f"{result.outcome} in {result.stage}: {result.detail}\n{fuzz.repro_source(program, result)}")


@pytest.mark.parametrize("seed", _params(FAST_SEEDS))
def test_real_programs_match_or_refuse(seed):
    _check(seed)


def _slow_selected(config) -> bool:
    """The slow slice (about a minute) runs when asked for: `-m slow` or DY2ST_RUN_SLOW=1."""
    expr = config.getoption("markexpr") or ""
    return os.environ.get("DY2ST_RUN_SLOW") == "1" or ("slow" in expr and "not slow" not in expr)


@pytest.mark.slow
@pytest.mark.parametrize("seed", _params(SLOW_SEEDS))
def test_real_programs_match_or_refuse_slow(seed, request):
    if not _slow_selected(request.config):
        pytest.skip("slow slice: run with -m slow or DY2ST_RUN_SLOW=1")
    _check(seed)


# -- the generator ------------------------------------------------------------------------------

CONSTRUCTS = {
    "traced if": r"^\s+if .*(\.sum\(\)|\.any\(\)|\.all\(\)|\[-?\d\]) [<>]=? -?\d+:$",
    "Python if": r"^\s+if len\((L|xs)\) [<>]=? \d:$",
    "else": r"^\s+else:$",
    "for range(const)": r"^\s+for i\d+ in range\(\d\):$",
    "for range(n)": r"^\s+for i\d+ in range\(n\):$",
    "for over a list": r"^\s+for v\d+ in (L|list\(L\)|L\[-3:\]|xs\[:\]):$",
    "for over an array": r"^\s+for e\d+ in (a\d|x|y):$",
    "enumerate": r"for i\d+, v\d+ in enumerate\(",
    "zip": r"for u\d+, v\d+ in zip\(",
    "reversed": r"in reversed\(",
    "while with a counter": r"^\s+while w\d+ < ",
    "break": r"^\s+break$",
    "continue": r"^\s+continue$",
    "loop else": r"^\s+else:\n\s+log\.append\(99\)",
    "try/finally": r"^\s+finally:$",
    "break inside try": r"try:\n\s+if .*:\n\s+(break|continue)",
    "with": r"^\s+with Ctx\(log, \d\) as c:$",
    "list append": r"\bL\.append\(",
    "list pop": r"\bL\.pop\(",
    "list index()": r"P\.index\(",
    "negative index": r"L\[-1\]",
    "slice": r"L\[-2:\]|L\[1:\]",
    "len": r"len\(L\)",
    "sum of a list": r"sum\(L\[",
    "dict set key": r'D\["[abc]"\] = ',
    "dict get": r"D\.get\(",
    "dict update": r"D\.update\(",
    "tuple": r"t\d+ = \(",
    "tuple unpacking": r"^\s+a\d, a\d = a\d, a\d$",
    "iter": r"it\d+ = iter\(",
    "for over an iterator + break": r"for v\d+ in it\d+:",
    "next(it)": r"next\(it\d+\)",
    "next(it, default)": r"next\(it\d+, ",
    "lambda": r"g\d+ = lambda v:",
    "lambda made in a loop body": r"^\s{8,}FN\.append\(lambda v:",
    "lambdas called later": r"for fn in FN:",
    "nested function": r"^\s+def h\d+\(v, w=\d\):",
    "nonlocal": r"nonlocal k\d",
    "method writing state": r"obj\.bump\(",
    "method appending": r"obj\.remember\(",
    "xs append": r"xs\.append\(",
    "xs item assignment": r"xs\[(0|-1)\] = ",
    "xs pop": r"xs\.pop\(\)",
    "max/min": r"\b(max|min)\(",
    "max with key": r"key=lambda v: v\.sum\(\)",
    "abs": r"\babs\(",
    "sorted": r"sorted\(P\)",
    "round": r"\bround\(",
    "divmod": r"divmod\(",
    "mixed Python/array int": r"\.sum\(\) > \d\)\) % 97",
    "max/min picking a number or an array": r"^\s+k\d = (max|min)\(",
    "sorted of numbers and arrays": r"^\s+k\d = sorted\(\[",
    "if giving a number or an array": r"^\s+k\d = (0\.5|True)$",
    "number-or-array choice times an array": r"\* (max|min)\(k\d, ",
    "int() of a number-or-array choice": r"k\d = int\((max|min)\(",
    "a number-or-array choice an inner if assigns as it is": r"if .*:\n\s+if .*:\n\s+(k\d = k\d|for _ in range\(0\):)\n",
    "variable first set in a loop": r"^\s{8,}t\d+ = clip\(",
    "a registered pytree object changed in place": r"obj\.acc\.w = clip\(",
    "a registered pytree object replaced": r"obj\.acc = Acc\(",
    "an array appended to log": r"log\.append\(clip\(",
    "log extended by augmented assignment": r"log \+= \[clip\(",
    "a dict changed in place by |=": r"D \|= \{",
    "a Ctx around a loop": r"with Ctx\(log, \d\) as c:\n\s+(if .*:\n\s+)?for ",
    "a list from before appended through a name bound here": r"(al\d+) = (log|obj\.cache|L|xs)\n\s+\1\.append\(clip\(",
    "a list or dict changed in place by another method": r"(L\.extend|L\.insert|L\.reverse|obj\.cache\.extend|D\.setdefault)\(",
    "a dict made here with its keys out of sorted order, read by position": r"(od\d+) = \{\"z\": .*\n\s+a\d = clip\(a\d \+ list\(\1\.values\(\)\)\[0\]\)",
    "a new key of D read by position": r'D\["b"\] = clip\(.*\n\s+a\d = clip\(a\d \+ list\(D\.values\(\)\)\[-1\]\)',
    "a list made here appended through one name, read through a dict": r"(mk\d+)\.append\(clip\(.*\n\s+a\d = clip\(sum\((md\d+)\['v'\]",
    "a method writing private (mangled) names in an if and a loop": r"a\d = clip\(a\d \+ obj\.shift\(",
    "a class defined in the function, an if in its body and in a method": r"class C\d+:\n\s+base = \d\n\s+if len\(L\)",
    "a method calling super() in an if and a loop": r"a\d = clip\(a\d \+ obj\.climb\(",
    # the call boundary (the `boundary-<seed>` stream)
    "a print of Python values": r'^\s+print\("p\d+", ',
    "a print in a branch or loop": r"^\s{8,}print\(",
    "a module global and a closure changed between calls": r"^def _change\(\):\n\s+global G",
    "a module global read": r"clip\(a\d \+ G\)|range\(G\)|_get\(\)\)",
    "a global counter written": r"^\s+COUNTER (\+= 1|= \()",
    "a module list appended to": r"HIST\.append\(",
    "a keyword argument whose type changes between calls": r"^def f\(x, y, n, xs, obj, s=1\):",
    "an exception a finally discards by break/continue": r"finally:\n\s+(log\.append\(5\)\n\s+)?(if .*:\n\s+)?(break|continue)$",
    "an exception a finally discards by return": r"finally:\n\s+if .*:\n\s+(GRID.*\n.*\n\s+)?return a0",
    "contextlib.suppress": r"with contextlib\.suppress\(",
    "an argument changed in place and returned": r"^\s+return a0, .*, (xs|obj\.cache|obj)\b",
    "objects shared in the result": r"^\s+return a0, .*(T, T|\[T\] \* 2|GRID|\[L, L\]|\[\[0\] \* 2\] \* 2)",
    # the numbers rule (the `numbers-<seed>` stream)
    "a number changed by an int on one path and a float on another in a staged loop":
        r"(acc\d+) (\+= 1|= acc\d+ \+ 2|\+= 1\.5)\n\s+else:\n\s+\1 ",
    "a step size halved in a staged while": r"alpha\d+ = alpha\d+ \* 0\.5",
    "a number picked by data between an int and an array": r"kk\d+ = (max|min)\(|kk\d+ = \d if ",
    # effects at the call boundary (the `effects-<seed>` stream)
    "a raise in a staged branch taken from some call on": r"if (not \()?.* \+ ROUND \* 2 > -?\d+\)?:\n",
    "a raise whose f-string reads traced values": r'raise \w+\(f"bad \{a\d\.sum\(\)\} at \{',
    "a raise with traced arguments": r'raise \w+\("bad", |raise Bad\("over", ',
    "a raise whose %-formatted message reads a traced value": r'raise \w+\("bad %s" % ',
    "a raise whose f-string reads a counter a staged loop carried": r'raise \w+\(f"over after \{ec\d+\} steps"\)',
    "a context manager class at f's top level": r"^    with Span\(\d\) as esp\d+",
    "a contextmanager generator": r"with span\(\d+\) as etg\d+:",
    "a context manager in a branch Python decides": r"if len\(EVENTS\) [<>]=? \d:\n\s+with Span",
    "a context manager in a loop Python decides": r"for etg\d+ in \(\d, \d+\):\n\s+with Span|while len\(EVENTS\) < \d:",
    "a class attribute counter bumped by a classmethod": r"Stats\.hit\(\)",
    "a base class attribute read through self": r"Scaled\(\)\.(apply\(|scale)",
    "a class attribute changed between calls": r"^    Stats\.scale = ",
    "a module-level iterator advanced by f": r"next\(IT(, [^)]+)?\)",
    "itertools.count": r"^IT = itertools\.count\(",
    "an iterator of arrays": r"^IT = iter\(\[jnp\.array",
    "an OrderedDict and a Counter made in f, returned": r"return a0, .*\b(eod|ecn)\b",
    "an OrderedDict changed in place": r'eod\.move_to_end\("z"|eod\["m"\] = ',
    "a print to the runner's file": r"print\(.*file=BUF\)",
    "a print to a file made in f, read back": r"print\(.*file=ebuf\)",
    "a Python int grown by a large constant in a loop": r"eb\d+ = eb\d+ \+ 2 \*\* 29",
    "pow of an int the data decides": r"pow\(ep\d+, \d, \d+\)",
    "a while True left by return at f's end": r"^    while True:\n(.*\n)*?\s+return a0",
    "a while True left by return in a nested function": r"def esearch\d+\(v\):\n\s+ej\d+ = 0\n\s+while True:",
    # calls and what they reach outside f's arguments (the `calls-<seed>` stream)
    "a try/except/else whose else changes a counter or a list of Python values":
        r"^\s+else:\n\s+(zc\d+ (\+=|=)|zl\d+\.append\()",
    "a try body that returns, with an except and an else":
        r"try:\n(?:[ ]+\S.*\n){0,4}?\s+return a0, .*\n(?:[ ]+\S.*\n){0,3}?\s+except \w.*:\n[ ]+\S.*\n[ ]+else:",
    "a try body that breaks or continues, with an except and an else":
        r"try:\n(?:[ ]+\S.*\n){0,4}?\s+(break|continue)\n(?:[ ]+\S.*\n){0,3}?\s+except \w.*:\n[ ]+\S.*\n[ ]+else:",
    "a try/except/else/finally": r"^\s+else:\n\s+.*\n(\s+.*\n)?\s+finally:\n",
    "a nested function whose try returns, with an else": r"def zh\d+\(v\):\n",
    "a helper's defaults replaced between calls": r"^    _helper\.__defaults__ = ",
    "a helper appending to its mutable default list": r"_bag\(",
    "a module list or dict returned": r"^\s+return a0, .*\b(ITEMS|REG)\b",
    "a default list returned": r"return a0, .*(_bag\(TICK\)|_bag\.__defaults__\[0\])",
    "a class attribute read under except AttributeError": r"= Knob2?(\(\))?\.gain\n\s+except AttributeError:",
    "getattr of a name string under except AttributeError": r"getattr\(Knob2?(\(\))?, zn\d+\)\n\s+except AttributeError:",
    "a class attribute deleted between calls": r"^        del Knob\.gain",
    "a Python-decided raise after prints and an append to xs":
        r"print\(.*\n\s+xs\.append\((7|TICK|len\(L\)|-1|n)\)\n(\s+xs\[0\] = .*\n)?\s+if .*:\n\s+raise ValueError\(",
    "a shift of an int the data decides": r"zn\d+ << \d\)",
    "a shift beyond int32 for some inputs": r"zn\d+ << (28|29|30)",
    "int() or round() of a float the data decides": r"(int|round)\((float\()?zf\d+\)",
    "a write to a module file": r"WBUF\.write\(",
    "a write in a branch": r"^\s+if .*:\n\s+WBUF\.write\(",
    "a write to sys.stdout": r"sys\.stdout\.write\(",
    "a class-based context manager that prints": r"with _Ctx\(log\)",
    "a draw of Python's random numbers": r"RNGX\.(randint|random)\(",
    "a conditional expression over one list": r"zr\d+ = (log|L|obj\.cache) if .* else (log|L|obj\.cache)$",
    "a conditional expression over two lists": r"zr\d+ = log if .* else P$",
    # Python values the data decides, used as Python uses them (the `flags-<seed>` stream)
    "a bool flag the data decides tested with is": r"if (zg\d+ is (not )?(True|False)|True is zg\d+):",
    "a bool flag the data decides counted with int()": r"int\(zg\d+\) \* 2\) % ",
    "a float the data decides shown by repr": r"print\('zr', repr\(zv\d+\), f'\{zv\d+!r\}'\)",
    "a finally that prints after a raise in a staged branch": r"raise ValueError\('zfail'\)\n.*\n\s+finally:\n\s+print\('zfin'",
    # lists changed through library calls in staged sides (the `libs-<seed>` stream)
    "a list changed by heapq or bisect in a staged side": r"^\s+(heapq\.heappush|bisect\.insort)\(zh\d+, \d\)$",
    "a list changed by operator.iadd or a bound method value in a staged side":
        r"^\s+(operator\.iadd\(zh\d+, \[\d\]\)|getattr\(zh\d+, 'append'\)\(\d\))$",
    # raises, jumps, lazy operands and outside attributes (the `lazy-<seed>` stream)
    "a staged if's assignments before a raise caught by except":
        r"try:\n\s+if .*:\n\s+lzv\d+ = clip\(.*\n\s+lzk\d+ = \d\n(.*\n)*?\s+raise ValueError\(.*\n\s+except ValueError:",
    "a staged if's assignments before a raise a context manager suppresses": r"with _Sup\(\):\n\s+if .*:\n\s+lzv\d+ = ",
    "a finally whose continue discards a break": r"try:\n(.*\n){1,3}?\s+break\n(.*\n)?\s+finally:\n\s+continue$",
    "an and/or whose right side appends": r"lzo\d+ = .* (and|or) _lognote\(lzl\d+\)$",
    "an and/or whose right side calls a helper without effects": r"lzo\d+ = .* (and|or) _peek\(lzl\d+\) > 0$",
    "a comparison chain whose last operand calls a helper": r"if -?\d < .*\.sum\(\) < (_hi|_peek)\(lzl\d+\)",
    "a conditional expression whose sides call a method": r"clip\(lzm\d+\.(mark|peek)\(1, .* if .* else lzm\d+\.(mark|peek)\(2, ",
    "all or any over a generator of array comparisons": r"lzo\d+ = (all|any)\((?!lzl)",
    "all or any over a generator with an effect": r"lzo\d+ = (all|any)\(lzl\d+\.append\(",
    "a defaultdict made in f changed in a staged side": r"defaultdict\((int|list).*\)\n(.*\n)?\s+if .*:\n\s+lzd\d+\[",
    "a defaultdict's present key bumped": r'lzd\d+\["a"\] \+= 1',
    "a defaultdict returned": r"log\.append\(lzd\d+\)",
    "a helper counting its calls in its own attribute": r"_counted\(",
    "a module made at run time read by f": r"_CFG\.K\b(?!( =| %))",
    "a counted loop left by a break on array data": r"lzs\d+ = lzi\d+ \+ 1\n\s+if \(.* \* lzi\d+\)\.sum\(\) > \d+:\n\s+break",
    # code shaped like model training (the `models-<seed>` stream)
    "gradient clipping over nested dict params": r"mzg\d+ = jax\.grad\(_mloss\)\(mzp\d+, .*\n(.*\n)?\s+if mzn\d+ > [\d.]+:\n\s+mzg\d+ = jax\.tree_util\.tree_map\(",
    "gradient clipping with a scale set on each side": r"if mzn\d+ > [\d.]+:\n\s+mzf\d+ = .*\n\s+else:\n\s+mzf\d+ = 1\.0",
    "gradient clipping in a helper beside a Python float": r"mzp\d+ = _mclip_step\(mzp\d+, .*, 0\.\d+",
    "a nested dict another local holds, rebound in a staged if": r"(mzh\d+) = mzc\d+\n\s+if .*:\n\s+\1 = \{",
    "an attribute's list items written in a staged if": r"if .*:\n\s+mzo\d+\.b\[0\] = .*\n\s+else:\n\s+mzo\d+\.b\[1\] = ",
    "the caller's object's list items written in a staged if": r"if .*:\n\s+obj\.cache\[-2\] = ",
    "an attribute's list item written in a loop": r"mzo\d+\.b\[0\] = (clip\()?mzo\d+\.b\[0\] \+ mzi\d+",
    "a method changing another item in the loop": r"mzo\d+\.bump_second\(\)",
    "the repr of a weakly typed array printed": r"mzw\d+ = jnp\.(asarray|array)\(.*\n\s+print\(.*repr\(mzw",
    "a weak array given to a helper that prints its repr": r"_mshow\(",
    "a closure over traced values kept in a module list": r"_MTAPE\.append\(lambda v(, w=\w+)?: v [+*] (a\d|x|y|mzl\d+\[0\])\)",
    "a partial over a traced value kept in a module dict": r'_MHOOKS\["scale"\] = functools\.partial\((jnp\.multiply, \w+\.sum\(\)|_mscale, k=(a\d|x|y))\)',
    "a closure over traced values set as a module object's attribute": r"_MTRAINER\.hook = lambda v: v \* (a\d|x|y)$",
    "a closure over Python values kept in a module list": r"^    _MTAPE\.append\(lambda v(, k=[^:]+)?: v [*+] (k|len\(\w+\)|\d)\)$",
    "an attribute named like a module global": r"mzs\d+\.params\[|_mapply\(mzs\d+",
    "a global named like the state's attributes changed between calls": r"^    h = h \+ 1$",
}


def _sources(count):
    return [draw_program(seed).source for seed in range(count)]


def test_generator_emits_every_construct():
    text = "\n".join(_sources(400))
    missing = [name for name, pattern in CONSTRUCTS.items() if not re.search(pattern, text, re.M)]
    assert not missing, f"no generated program contains: {missing}"


def test_generator_reads_loop_variables_after_loops():
    """Some program reads, after its loop, a variable the loop body set first (zero-trip loops)."""
    for source in _sources(200):
        late = re.findall(r"^\s{8,}(t\d+) = clip\(", source, re.M)
        body = source.split("def f(")[1]
        if any(len(re.findall(rf"\b{t}\b", body)) > 1 for t in late):
            return
    pytest.fail("no program reads a loop-created variable after its loop")


def test_calls_stream_leaves_the_other_streams_draws():
    """The `calls-<seed>` stream draws from its own random stream: a seed it is not drawn for
    gives the program it gave before, and one it is drawn for keeps every line of that program
    (in order; f's returns gain values at their end) and its inputs."""
    drawn = 0
    for seed in range(60):
        with_calls, without = draw_program(seed), draw_program(seed, calls_stream=False)
        assert with_calls.inputs_text() == without.inputs_text()
        if "TICK = " not in with_calls.source:
            assert with_calls.source == without.source
            continue
        drawn += 1
        lines = iter(with_calls.source.splitlines())
        for line in without.source.splitlines():
            returns = line.lstrip().startswith("return a0, ")
            assert any(other == line or returns and other.startswith(line) for other in lines), (seed, line)
    assert 10 < drawn < 35


@pytest.mark.parametrize("stream, names, bounds", [
    ("lazy_stream", r"\blz[a-z]\d+\b|_CFG|_counted|_Sup", (8, 35)),
    ("models_stream", r"\bmz[a-z]\d+\b|_MPair|_MTAPE|_mloss|_mshow|_TState|\bmq[a-z]\d+\b|_MQ|_mq_", (10, 40)),
    ("models_late_stream", r"\bml[a-z]\d+\b|_ML|_ml_|_MHANDLERS", (8, 35)),
    ("models_last_stream", r"\bmx[a-z]+\d+\b|_MX|_mx_|import math", (6, 30)),
])
def test_a_stream_leaves_the_other_streams_draws(stream, names, bounds):
    """The `lazy-<seed>` and `models-<seed>` streams each draw from their own random stream,
    name from their own counter and write their module code only where drawn: a seed a stream
    is not drawn for gives the program it gave before, and one it is drawn for keeps every line
    of that program (in order) and its inputs."""
    drawn = 0
    for seed in range(60):
        with_stream, without = draw_program(seed), draw_program(seed, **{stream: False})
        assert with_stream.inputs_text() == without.inputs_text()
        if with_stream.source == without.source:
            assert not re.search(names, with_stream.source), seed
            continue
        drawn += 1
        lines = iter(with_stream.source.splitlines())
        for line in without.source.splitlines():
            assert any(other == line for other in lines), (seed, line)
    assert bounds[0] < drawn < bounds[1]


# Each class of the models stream alone in a small f (`draw_models_kind`): what to_static must do.
_TRACED_CLOSURE = (r"lambda v(, w=\w+)?: v [+*] (a\d|x|y|mzl\d+\[0\])\)|functools\.partial\(jnp\.multiply, \w+\.sum\(\)\)"
                   r"|functools\.partial\(_mscale, k=(a\d|x|y)\)|_MTRAINER\.hook = lambda v: v \* (a\d|x|y)$")
MODELS_CASES = [("grad_clip", 0), ("grad_clip", 1), ("grad_clip", 11), ("item_attrs", 0), ("item_attrs", 1),
                ("item_attrs", 17), ("item_attrs", 25), ("weak_repr", 0), ("weak_repr", 1), ("weak_repr", 2),
                ("weak_repr", 5),  # w * 2 of a jnp.array(2.5) made before a staged if, printed as a float
                ("kept_closure", 1), ("kept_closure", 6), ("kept_closure", 7), ("kept_closure", 12),
                ("kept_closure", 15), ("attr_global", 0), ("attr_global", 3)]


@pytest.mark.parametrize("kind, seed", MODELS_CASES, ids=[f"{k}-{s}" for k, s in MODELS_CASES])
def test_models_stream_classes_match_or_refuse(kind, seed):
    """Gradient clipping over nested params matches (a nested dict another local holds, rebound in
    a staged if: refused or a match); an attribute's list items written with constant indices in a
    staged if or loop match, beside a method changing another item in a staged loop they are
    refused; weak arrays' reprs print as eagerly; a closure over traced values kept in a module
    list, dict or object is refused at the call with the global left as it was, one over Python
    values matches (the list grows per call); an attribute named like a changing global matches."""
    import dy2st

    program = draw_models_kind(seed, kind)
    body = program.source.split("\ndef f(")[1]
    result = fuzz.run_real_program(program)
    detail = f"{result.outcome} in {result.stage}: {result.detail}\n{body}"
    staged_method = "bump_second()" in body and (program.n_as_array or re.search(r"while .* and ", body))
    traced_closure = kind == "kept_closure" and re.search(_TRACED_CLOSURE, body, re.M)
    if staged_method or traced_closure:
        assert result.outcome == RealOutcome.REFUSAL, detail
    elif re.search(r"mzh\d+ = mzc\d+", body):
        assert result.outcome in (RealOutcome.MATCH, RealOutcome.REFUSAL), detail
    else:
        assert result.outcome == RealOutcome.MATCH, detail
    if traced_closure:  # refused at the call, and the module's objects left as they were
        module = fuzz.load_module(program.source)
        inputs = fuzz.RealInputs(program.x, program.y, program.n, program.n_as_array, program.xs)
        with pytest.raises(dy2st.errors.PythonEffectError, match="traced"):
            dy2st.to_static(module.f)(*inputs.arrays(), inputs.fresh_xs(), module.State())
        assert module._MTAPE == [] and module._MHOOKS == {} and module._MTRAINER.hook is None


# The models stream's later classes (`MODELS_MORE_KINDS`, drawn from `models-more-<seed>`), each
# alone: a match, or a refusal where dy2st refuses the class (never a mismatch or a raw error).
MODELS_MORE_CASES = [(kind, seed) for kind in ("unbound", "list_both_sides", "new_function", "print_repr", "redirect")
                     for seed in (0, 1, 3, 5, 8, 11)]


def _mq_body(kind, seed):
    program = draw_models_kind(seed, kind)
    return program, program.source.split("\ndef f(")[1]


def _refused_more(kind, body, program) -> bool:
    """Whether dy2st refuses this program of the later models classes today: a local StringIO read
    back after a print into it; a returned function with a mutable default, closing over a traced
    `n`, or picked by a staged if. (One calling a builtin from its closure, `len(tag)`, converts:
    its cells hold the runtime module, a constant.)"""
    if kind == "redirect":
        return ".getvalue()" in body
    if kind == "new_function":
        return bool("seen=[]" in body or re.search(r"mqk\d+ = n$", body, re.M) and program.n_as_array
                    or re.search(r"if .*:\n\s+mqf\d+ = lambda", body))
    return False


@pytest.mark.parametrize("kind, seed", MODELS_MORE_CASES, ids=[f"{k}-{s}" for k, s in MODELS_MORE_CASES])
def test_models_stream_later_classes_match_or_refuse(kind, seed):
    """A local a staged if or a loop of traced trip count leaves unbound (eager's UnboundLocalError
    where the data left it so, dy2st's when the program runs), the caller's list appended to on both
    sides of a staged if, a function made in f returned (a new object per call, eager's values),
    reprs of bool/summarised/empty/int8/bfloat16 arrays and a printed dataclass returned, prints
    redirected into a module StringIO: each matches; the refused twins are refused."""
    program, body = _mq_body(kind, seed)
    result = fuzz.run_real_program(program)
    detail = f"{result.outcome} in {result.stage}: {result.detail}\n{body}"
    expected = RealOutcome.REFUSAL if _refused_more(kind, body, program) else RealOutcome.MATCH
    assert result.outcome == expected, detail


# The models stream's latest classes (`MODELS_LATE_KINDS`, drawn from `models-late-<seed>`), each
# reading module state `_change()` changes between calls: what each draws in f's body.
_LATE_MARKS = {"implicit_code": r"_MLBOX|_MLBox\(\)|_MLHolder",
               "passed_function": r"key=_ml_a?key|map\(_ml_fn|filter\(_ml_keep|reduce\(_(ml_add|MLACC)",
               "static_config": r"_MLCFG", "bound_method": r"_MHANDLERS\[|_MLAPPLY\(|_MLObj\(|_ml_call\(",
               "tuple_object": r"_ml_bump(_w)?\(mlt\d+"}
MODELS_LATE_CASES = [(kind, seed) for kind in MODELS_LATE_KINDS for seed in (0, 1, 2)]


@pytest.mark.parametrize("kind, seed", MODELS_LATE_CASES, ids=[f"{k}-{s}" for k, s in MODELS_LATE_CASES])
def test_models_stream_latest_classes_match_or_refuse(kind, seed):
    """Code Python calls by itself, functions passed to sorted/map/reduce, a frozen config rebound,
    a bound method kept in a module dict, an object in a tuple a helper changes: each reads module
    state `_change()` changes between calls, and to_static gives eager's results, prints and globals
    on every call (or refuses)."""
    program = draw_models_kind(seed, kind)
    body = program.source.split("\ndef f(")[1]
    assert re.search(_LATE_MARKS[kind], body), body
    assert "_change_models_late" in program.source and "_GLOBALS = " in program.source
    result = fuzz.run_real_program(program)
    detail = f"{result.outcome} in {result.stage}: {result.detail}\n{body}"
    assert result.outcome in (RealOutcome.MATCH, RealOutcome.REFUSAL), detail


def test_descriptor_read_through_its_class_sees_the_global_change():
    """(A descriptor read through its class, `_MLHolder.scale`, whose `__get__` reads a global,
    kept the first call's value: the classes a function's globals hold are noted now.)"""
    program = draw_models_kind(35, "implicit_code")
    assert "_MLHolder.scale" in program.source.split("\ndef f(")[1]
    result = fuzz.run_real_program(program)
    assert result.outcome == RealOutcome.MATCH, f"{result.outcome} in {result.stage}: {result.detail}"


def test_models_late_stream_draws_each_class_in_full_programs():
    bodies = [draw_program(seed).source.split("\ndef f(")[1] for seed in range(200)]
    for kind, pattern in _LATE_MARKS.items():
        assert any(re.search(pattern, body) for body in bodies), kind


# The models stream's last classes (`MODELS_LAST_KINDS`, drawn from `models-last-<seed>`), each a
# class dy2st once got wrong: what each draws in f's body.
_LAST_MARKS = {"ternary_own_list": r"mxl\d+ = (mxl\d+ if .* else \[|\[.* if .* else mxl\d+$)",
               "loop_else_return": r"_mx_(find|scan|walk|first)\(",
               "counter_while": r"while .*\bmxit\d+ < (\d|_MX_N)",
               "math_float": r"math\.(copysign|fabs)\(mxs\d+|math\.copysign\(.*mxs\d+\)",
               "keyword_only": r"_mx_kw(_need)?\(.*\w=|_mx_kw\(.*\*\*\{"}
MODELS_LAST_CASES = [(kind, seed) for kind in MODELS_LAST_KINDS for seed in (0, 1, 2)]


@pytest.mark.parametrize("kind, seed", MODELS_LAST_CASES, ids=[f"{k}-{s}" for k, s in MODELS_LAST_CASES])
def test_models_stream_last_classes_match_or_refuse(kind, seed):
    """A conditional expression giving a new list or the list only its name holds, appended to after;
    a module helper whose loop returns early on array data and whose `else:` returns; a `while`
    bounded by a counter the body steps (f's gradient through it; with a `continue`: no bound, still
    eager's); `math.copysign`/`math.fabs` of a float the data picks; a helper's keyword-only
    parameters given in varying orders: each gives eager's results. The twin whose old list another
    local holds too (eager's aliasing decided by data) is refused."""
    program = draw_models_kind(seed, kind)
    body = program.source.split("\ndef f(")[1]
    assert re.search(_LAST_MARKS[kind], body, re.M), body
    result = fuzz.run_real_program(program)
    detail = f"{result.outcome} in {result.stage}: {result.detail}\n{body}"
    twin = re.search(r"mxo\d+ = mxl\d+$", body, re.M)
    assert result.outcome == (RealOutcome.REFUSAL if twin else RealOutcome.MATCH), detail


def test_models_last_stream_draws_each_class_in_full_programs():
    bodies = [draw_program(seed).source.split("\ndef f(")[1] for seed in range(200)]
    for kind, pattern in _LAST_MARKS.items():
        assert any(re.search(pattern, body, re.M) for body in bodies), kind
    # the twins too: an old list another local holds, a counter loop with a continue, a global bound
    assert any(re.search(r"mxo\d+ = mxl\d+$", body, re.M) for body in bodies)
    assert any(re.search(r"mxit\d+ \+= 1\n(.*\n)?\s*if .*:\n\s+continue", body) for body in bodies)
    assert any("mxit" in body and "< _MX_N" in body for body in bodies)


def _eager_error(program):
    import contextlib
    import io

    module = fuzz.load_module(program.source)
    inputs = fuzz.RealInputs(program.x, program.y, program.n, program.n_as_array, program.xs)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            module.f(*inputs.arrays(), inputs.fresh_xs(), module.State())
    except Exception as e:  # noqa: BLE001
        return e
    return None


def test_unbound_class_reads_locals_the_data_may_leave_unbound():
    """The `unbound` class draws each shape (a staged if's one side, a loop of traced trip count,
    an array iterated, a while on array data, a read before the body sets it), and inputs that
    leave the local unbound (eager raises UnboundLocalError; to_static raises an UnboundLocalError
    too, and the runner counts that a match) and that bind it."""
    import dy2st

    bodies = {seed: _mq_body("unbound", seed) for seed in range(40)}
    text = "\n".join(body for _, body in bodies.values())
    for pattern in [r"if .*:\n\s+mqu\d+ = ", r"for mqi\d+ in range\(n", r"for mqi\d+ in (x|y|jnp\.zeros)",
                    r"while .*mqi\d+", r"mqu\d+ \+= ", r"if .*\[mqi\d+ % 3\] > -?\d+:\n\s+\w+ = clip\(\w+ \+ mqp\d+\)"]:
        assert re.search(pattern, text), pattern
    raised = [seed for seed, (program, _) in bodies.items() if isinstance(_eager_error(program), UnboundLocalError)]
    assert 5 < len(raised) < 35, raised
    program, body = bodies[raised[0]]
    module = fuzz.load_module(program.source)
    inputs = fuzz.RealInputs(program.x, program.y, program.n, program.n_as_array, program.xs)
    with pytest.raises(UnboundLocalError):
        dy2st.to_static(module.f)(*inputs.arrays(), inputs.fresh_xs(), module.State())
    assert fuzz.run_real_program(program).outcome == RealOutcome.MATCH, body


def test_runner_counts_eager_unbound_local_against_dy2st(monkeypatch):
    """Eager's UnboundLocalError met by dy2st's UndefinedVariableError (raised when the program
    runs) is a match where the call left what eager left (a refusal where not: today dy2st drops
    an append to the caller's list made before the read); a value returned where eager raised is
    a mismatch."""
    import dy2st

    body = "    if x.sum() > 100:\n        u = x * 2\n    return x + u\n"
    result = fuzz.run_real_program(_program(body))
    assert result.outcome == RealOutcome.MATCH and "UnboundLocalError" in result.detail, result.detail
    effects = fuzz.run_real_program(_program("    xs.append(x)\n" + body))
    assert effects.outcome in (RealOutcome.MATCH, RealOutcome.REFUSAL), effects.detail
    monkeypatch.setattr(dy2st, "to_static", lambda fn: lambda *args, **kwargs: 0)
    result = fuzz.run_real_program(_program(body))
    assert result.outcome == RealOutcome.MISMATCH and "eager raised UnboundLocalError" in result.detail, result.detail


def test_list_both_sides_class_appends_to_the_callers_list_on_both_sides():
    text = "\n".join(_mq_body("list_both_sides", seed)[1] for seed in range(20))
    for pattern in [r"if .*:\n\s+(xs|mqt\d+)\.append\(.*\n\s+(elif .*:\n\s+.*\n\s+)?else:\n",
                    r"elif ", r"(xs|obj\.cache|mqt\d+) \+= \[", r"mqs\d+ = (xs|obj\.cache|mqt\d+)\n\s+mqs\d+\.append",
                    r"len\((xs|obj\.cache)\)", r"log\.append\((xs|mqt\d+|obj\.cache)\)$"]:
        assert re.search(pattern, text, re.M), pattern


def test_new_function_class_is_checked_for_a_new_object_per_call(monkeypatch):
    """The runner marks each function f returns and compares what calling it gives: a dy2st that
    gave the first call's function again (the bug f7c8936 fixed) is a mismatch."""
    from dy2st.runtime import static_outputs

    program, body = _mq_body("new_function", 0)
    assert re.search(r"log(\.append\(| \+= \[)mqf\d+", body) and "_MQ_FUNCTIONS = True" in program.source
    assert fuzz.run_real_program(program).outcome == RealOutcome.MATCH
    monkeypatch.setattr(static_outputs._NewFunction, "copy", lambda self: self.fn)
    result = fuzz.run_real_program(program)
    assert result.outcome == RealOutcome.MISMATCH and "functions f returned" in result.detail, result.detail


def test_print_repr_class_prints_what_numpy_lays_out_specially():
    text = "\n".join(_mq_body("print_repr", seed)[1] for seed in range(30))
    for pattern in [r"repr\(\w+ > 0\)", r"\)\.all\(\)", r"jnp\.tile\(", r"\[:0\]", r"astype\(jnp\.int8\)",
                    r"astype\(jnp\.bfloat16\)", r"if .*:\n\s+print\(", r"print\((repr\()?mqr\d+\)|print\(\"rec\", mqr",
                    r"log\.append\(mqr\d+\)"]:
        assert re.search(pattern, text), pattern


def test_redirect_class_writes_the_module_buffer_and_refuses_reading_back_a_local_one():
    import dy2st

    bodies = {seed: _mq_body("redirect", seed) for seed in range(12)}
    assert any("with contextlib.redirect_stdout(_MQBUF):" in body for _, body in bodies.values())
    program, body = next(pair for pair in bodies.values() if ".getvalue()" in pair[1])
    module = fuzz.load_module(program.source)
    inputs = fuzz.RealInputs(program.x, program.y, program.n, program.n_as_array, program.xs)
    with pytest.raises(dy2st.errors.PythonEffectError, match="getvalue"):
        dy2st.to_static(module.f)(*inputs.arrays(), inputs.fresh_xs(), module.State())
    program, body = bodies[3]  # prints into _MQBUF (in a staged if too): its text grows on every call
    assert "_MQBUF" in body
    module = fuzz.load_module(program.source)
    static = dy2st.to_static(module.f)
    texts = []
    for _ in range(2):
        static(*inputs.arrays(), inputs.fresh_xs(), module.State())
        texts.append(module._MQBUF.getvalue())
    assert texts[0] and texts[1].startswith(texts[0]) and len(texts[1]) > len(texts[0])


def test_generator_is_seeded_and_valid():
    assert draw_program(7).source == draw_program(7).source
    assert draw_program(7).source != draw_program(8).source
    for source in _sources(300):
        compile(source, "<generated>", "exec")
    inputs = [draw_program(seed) for seed in range(100)]
    assert {p.n for p in inputs} == {0, 1, 3} and {p.n_as_array for p in inputs} == {False, True}
    assert all(len(set(p.x.tolist() + p.y.tolist())) == 6 for p in inputs)  # distinct values


# -- the runner ---------------------------------------------------------------------------------


def _program(body, n=1, n_as_array=False):
    source = PRELUDE + "\ndef f(x, y, n, xs, obj):\n" + body
    return RealProgram(0, source, np.array([1, 2, 3], np.float32), np.array([4, 5, -1], np.float32), n,
                       n_as_array, [np.array([0, 1, 2], np.float32)])


GOOD = """\
    a = x
    if a.sum() > 2:
        a = a * 2
    xs.append(a)
    obj.remember(3)
    return a, len(xs), [y, n]
"""


def test_runner_matches_a_correct_program():
    assert fuzz.run_real_program(_program(GOOD)).outcome == RealOutcome.MATCH
    assert fuzz.run_real_program(_program(GOOD, n=3, n_as_array=True)).outcome == RealOutcome.MATCH


def test_runner_reports_value_and_side_effect_mismatches(monkeypatch):
    real = fuzz.dy2st.to_static

    def forgets_xs(f):
        static = real(f)
        return lambda x, y, n, xs, obj: static(x, y, n, list(xs), obj)  # the caller never sees appends

    monkeypatch.setattr(fuzz.dy2st, "to_static", forgets_xs)
    result = fuzz.run_real_program(_program(GOOD))
    assert (result.outcome, result.stage) == (RealOutcome.MISMATCH, "to_static")
    assert result.detail.startswith("side effect: structure"), result.detail


def test_runner_compares_dtypes_and_python_numbers():
    assert fuzz.tree_difference((1, 2.0), (1, 2.0), "r") is None
    import jax.numpy as jnp

    # the numbers rule: a 0-d array that holds eager's number (an int as a float where paths disagree)
    assert fuzz.tree_difference((1,), (jnp.asarray(1),), "r") is None  # weak-typed int32
    assert fuzz.tree_difference((1,), (jnp.asarray(1, jnp.int32),), "r") is None  # strong
    assert fuzz.tree_difference((1,), (jnp.asarray(1.0),), "r") is None
    assert "int32" in fuzz.tree_difference((1.5,), (jnp.asarray(1, jnp.int32),), "r")  # a float as an int
    assert "float32[2]" in fuzz.tree_difference((1,), (jnp.ones(2),), "r")  # not 0-d
    assert "Python int 1" in fuzz.tree_difference((jnp.asarray(1),), (1,), "r")  # a number for an array
    assert "2.0" in fuzz.tree_difference((1,), (jnp.asarray(2.0),), "r")  # another value
    assert "structure" in fuzz.tree_difference([1], (1,), "r")
    assert fuzz.tree_difference((jnp.ones(2),), (jnp.ones(2, jnp.int32),), "r") is not None


def test_runner_eager_errors_must_be_reproduced():
    body = """\
    for i in range(n):
        t = x * 2
    return t
"""
    # eager raises UnboundLocalError for n == 0: to_static must raise it too, or refuse clearly
    result = fuzz.run_real_program(_program(body, n=0, n_as_array=True))
    assert result.outcome in (RealOutcome.MATCH, RealOutcome.REFUSAL), result
    assert fuzz.run_real_program(_program(body, n=3)).outcome == RealOutcome.MATCH


def test_runner_reports_invalid_and_raw_errors():
    assert fuzz.run_real_program(_program("    return undefined_name\n")).outcome == RealOutcome.INVALID
    assert fuzz.run_real_program(_program("    return (\n")).outcome == RealOutcome.INVALID
    refused = _program("    if x.sum() > 0:\n        k = 1\n    else:\n        k = jnp.ones(2)\n    return k\n")
    result = fuzz.run_real_program(refused)
    assert result.outcome in (RealOutcome.REFUSAL, RealOutcome.RAW_ERROR)
    assert result.outcome == RealOutcome.REFUSAL or "Error" in result.detail


def test_repro_replays_standalone(tmp_path, capsys):
    program = _program(GOOD)
    source = fuzz.repro_source(program, fuzz.Result(RealOutcome.MISMATCH, "to_static", "made up"))
    path = tmp_path / "repro.py"
    path.write_text(source)
    module = fuzz.load_module(source)  # the same text, imported as a module
    assert 'if __name__ == "__main__":' in source and "replay_real(f, State" in source
    result = fuzz.replay_real(module.f, module.State, x=[1, 2, 3], y=[4, 5, -1], n=1, n_as_array=False,
                              xs=[[0, 1, 2]])
    assert result.outcome == RealOutcome.MATCH and "outcome: match" in capsys.readouterr().out


def test_main_real_generator_prints_counts(tmp_path, capsys):
    fuzz.main(["--generator", "real", "--examples", "4", "--seed", "0", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert re.search(r"programs:\s+4\b", out)
    for label in ("match:", "refusal:", "MISMATCH:", "RAW ERROR:", "INVALID:"):
        assert label in out


# -- the runner: the call boundary ----------------------------------------------------------------

HEADER = """
G = 2
COUNTER = 0
HIST = []


def _change():
    global G
    G = G + 1


_GLOBALS = ("G", "COUNTER", "HIST")
"""


def _boundary_program(body, header=HEADER, signature="def f(x, y, n, xs, obj):", **fields):
    program = _program(body)
    return dataclasses.replace(program, source=PRELUDE + header + "\n" + signature + "\n" + body, **fields)


def _wrapping_to_static(monkeypatch, wrap):
    real = fuzz.dy2st.to_static

    def to_static(f):
        static = real(f)
        return lambda *args, **kwargs: wrap(static(*args, **kwargs), args)

    monkeypatch.setattr(fuzz.dy2st, "to_static", to_static)


RETURNS_XS_AND_ALIASES = """\
    xs.append(x)
    t = [y]
    if x.sum() > 0:
        t[0] = x
    print("v", len(xs), n)
    return xs, t, t, [[0] * 2] * 2
"""


def test_runner_matches_identity_aliasing_and_stdout():
    assert fuzz.run_real_program(_program(RETURNS_XS_AND_ALIASES)).outcome == RealOutcome.MATCH


def test_runner_reports_identity_of_returned_arguments(monkeypatch):
    _wrapping_to_static(monkeypatch, lambda out, args: (list(out[0]), *out[1:]))  # a copy of xs
    result = fuzz.run_real_program(_program(RETURNS_XS_AND_ALIASES))
    assert result.outcome == RealOutcome.MISMATCH and "identity" in result.detail, result
    assert "the caller's xs" in result.detail


def test_runner_reports_aliasing(monkeypatch):
    _wrapping_to_static(monkeypatch, lambda out, args: (out[0], out[1], list(out[2]), out[3]))  # t, copy of t
    result = fuzz.run_real_program(_program(RETURNS_XS_AND_ALIASES))
    assert result.outcome == RealOutcome.MISMATCH and "the same object as" in result.detail, result


def test_runner_reports_stdout(monkeypatch):
    def prints(out, args):
        print("extra")
        return out

    _wrapping_to_static(monkeypatch, prints)
    result = fuzz.run_real_program(_program(RETURNS_XS_AND_ALIASES))
    assert result.outcome == RealOutcome.MISMATCH and result.detail.startswith("stdout"), result


def test_identity_signature():
    xs, t = [1], [2]
    signature = fuzz.identity_signature(((xs, t, t, {"a": t}),), [("xs", xs)])
    assert [label for _, label in signature] == ["the caller's xs", "new list #0", "the same object as #0",
                                                 "new dict #1", "the same object as #0"]


COUNTS = """\
    global COUNTER
    COUNTER += 1
    HIST.append(G)
    print("c", COUNTER, G)
    return x * G, COUNTER, len(HIST)
"""


def test_runner_compares_module_state_across_calls(monkeypatch):
    program = _boundary_program(COUNTS)
    assert fuzz.run_real_program(program).outcome == RealOutcome.MATCH

    def forgets(out, args):  # a program that keeps the first call's result, counts and all
        forgets.first = getattr(forgets, "first", out)
        return forgets.first

    _wrapping_to_static(monkeypatch, forgets)
    result = fuzz.run_real_program(program)
    assert result.outcome == RealOutcome.MISMATCH and result.stage == "to_static, call 2", result


SCALAR = """\
    if isinstance(s, bool):
        x = x - 1
    return x * s, s * 2, type(s).__name__, n
"""


def test_runner_checks_scalar_types_per_call(monkeypatch):
    program = _boundary_program(SCALAR, header="", signature="def f(x, y, n, xs, obj, s=1):",
                                s_values=(1, 1.0, True), n_values=(1, True, 1))
    assert fuzz.run_real_program(program).outcome == RealOutcome.MATCH
    _wrapping_to_static(monkeypatch, lambda out, args: (out[0], int(out[1]), *out[2:]))
    result = fuzz.run_real_program(program)
    assert result.outcome == RealOutcome.MISMATCH and result.stage == "to_static, call 2", result
    assert "2 (int), eager 2.0 (float)" in result.detail


def test_refusals_are_grouped_by_class_and_message_head(tmp_path):
    detail = ('dy2st.errors.LoopVariableError: File "p.py", line 3, in f\n    for i in range(n):\n'
              "'log' is appended to in a staged loop whose number of iterations is 12\nTo fix: ...")
    assert fuzz.refusal_kind(detail) == "LoopVariableError: _ is appended to in a staged loop whose number of iterations is _"
    summary = fuzz.real_campaign(3, 0, str(tmp_path), check_grad=False, verbose=False)
    assert sum(count for count, _ in summary["refusals"].values()) == summary[fuzz.RealOutcome.REFUSAL]


# -- the runner: effects (the `effects-<seed>` stream) ----------------------------------------------

EFFECTS_HEADER = """
import collections
import io

ROUND = 0
BUF = io.StringIO()


class Stats:
    calls = 0
    scale = 2

    @classmethod
    def hit(cls):
        cls.calls += 1
        return cls.calls


def _change():
    global ROUND, BUF
    ROUND = ROUND + 1
    Stats.scale = Stats.scale + 1
    BUF = io.StringIO()


_GLOBALS = ("ROUND", "Stats.calls", "Stats.scale", "BUF")
"""

RAISES_FROM_CALL_2 = """\
    print("p", Stats.hit(), x.sum(), file=BUF)
    if x.sum() + ROUND * 2 > 7:
        raise ValueError(f"bad {x.sum()} at {x[0]}")
    return x * Stats.scale, collections.Counter({"a": Stats.calls})
"""


def _on_value_error(monkeypatch, handle):
    """Make `fuzz.dy2st.to_static` give functions that call `handle(error, args)` where the
    real StaticFunction raises a ValueError: a to_static the runner must tell apart from eager."""
    real = fuzz.dy2st.to_static

    def to_static(f):
        static = real(f)

        def call(*args, **kwargs):
            try:
                return static(*args, **kwargs)
            except ValueError as e:
                handle(e, args)
        return call

    monkeypatch.setattr(fuzz.dy2st, "to_static", to_static)


def test_runner_compares_exception_messages_class_attributes_and_files(monkeypatch):
    program = _boundary_program(RAISES_FROM_CALL_2, header=EFFECTS_HEADER)
    result = fuzz.run_real_program(program)
    # every call of to_static agrees (under a jax.jit of the caller's, the raise is refused)
    assert result.outcome == RealOutcome.MATCH or (result.outcome, result.stage) == (RealOutcome.REFUSAL, "jit"), result

    def another_message(error, args):
        raise ValueError(str(error) + "!") from error

    _on_value_error(monkeypatch, another_message)  # the same class, another message
    result = fuzz.run_real_program(program)
    assert result.outcome == RealOutcome.MISMATCH and result.stage == "to_static, call 2", result
    assert "message 'bad 6.0 at 1.0!', eager 'bad 6.0 at 1.0'" in result.detail, result
    # class attributes by dotted names, a file by its text
    state = fuzz._module_state(fuzz.load_module(PRELUDE + EFFECTS_HEADER))
    assert state == {"ROUND": 0, "Stats.calls": 0, "Stats.scale": 2, "BUF": ""}


def test_runner_compares_counters_by_their_items():
    from collections import Counter, OrderedDict

    assert fuzz.tree_difference([Counter("aab")], [Counter("aab")], "r") is None
    assert "Counter items" in fuzz.tree_difference([Counter("aab")], [Counter("ab")], "r")
    assert fuzz.tree_difference([Counter(a=1, b=2)], [Counter(b=2, a=1)], "r") is not None  # their order
    assert fuzz.tree_difference(OrderedDict(z=1, a=2), OrderedDict(a=2, z=1), "r") is not None


# -- the runner: calls (the `calls-<seed>` stream) --------------------------------------------------

CALLS_HEADER = """
TICK = 0
ITEMS = [1, 2]
REG = {"lst": [3]}


def _bag(v, seen=[]):
    seen.append(v)
    return seen


def _change():
    global TICK
    TICK = TICK + 1
    REG["lst"] = [TICK]


_GLOBALS = ("TICK", "ITEMS", "REG", "_bag.__defaults__")
_OUTSIDE = ("ITEMS", 'REG["lst"]', "_bag.__defaults__[0]")
"""

RETURNS_OUTSIDE = """\
    print("p", TICK, x.sum())
    xs.append(TICK)
    if TICK == 1:
        raise ValueError(f"stop {len(xs)}")
    return x * 2, ITEMS, [REG["lst"]], _bag(TICK)
"""


def test_runner_compares_identity_of_returned_module_objects(monkeypatch):
    program = _boundary_program(RETURNS_OUTSIDE, header=CALLS_HEADER)
    assert fuzz.run_real_program(program).outcome == RealOutcome.MATCH
    for copy, name in (((lambda out: (out[0], list(out[1]), *out[2:])), "outside ITEMS"),
                       ((lambda out: (*out[:2], [list(out[2][0])], out[3])), "outside REG[\"lst\"]"),
                       ((lambda out: (*out[:3], list(out[3]))), "outside _bag.__defaults__[0]")):
        monkeypatch.undo()
        _wrapping_to_static(monkeypatch, lambda out, args, copy=copy: copy(out))
        result = fuzz.run_real_program(program)
        assert result.outcome == RealOutcome.MISMATCH and "identity" in result.detail, result
        assert f"eager the caller's {name}" in result.detail, result  # a copy of the module's object


def test_runner_compares_what_a_call_did_before_eagers_exception(monkeypatch):
    program = _boundary_program(RETURNS_OUTSIDE, header=CALLS_HEADER)
    def loses_the_append(error, args):
        args[3].pop()  # the caller's xs without the item eager appended before raising
        raise error

    _on_value_error(monkeypatch, loses_the_append)
    result = fuzz.run_real_program(program)
    assert result.outcome == RealOutcome.MISMATCH and result.stage == "to_static, call 2", result
    assert result.detail.startswith("side effect (both raised ValueError)"), result

"""A seeded generator of programs shaped like real code, for the second differential fuzzer.

`draw_program(seed)` returns a `RealProgram`: the source of a module defining a small stateful
class `State`, a context manager `Ctx`, and `f(x, y, n, xs, obj)`, plus its inputs:

* `x`, `y`: float32[3] arrays of small distinct integers;
* `n`: 0, 1 or 3, a Python int or an int32 array (so `range(n)` may be staged and run zero times);
* `xs`: a list of arrays the caller owns (and reads after the call);
* `obj`: a `State` (an int `count`, a list `cache`, an array `h`, methods that write them).

The body of `f` composes statement templates at random, nested inside `if`/`else` (traced and
Python conditions), `for` loops (over `range` of a constant or of `n`, over a list, `enumerate`,
`zip`, `reversed`, the elements of an array), bounded `while` loops, `break`/`continue`,
`try`/`finally` and `with`. Statements use what real code uses and `program_gen` does not:
local lists (append, pop, indexing, negative indices, slices, len, sum), dicts, tuples,
iterators, closures and lambdas (also made in loop bodies, called later), nested functions,
methods of `obj`, mutations of `xs`, builtins, values mixing Python numbers and arrays, and
variables first set inside a loop that may run zero times.

Values stay exactly representable (arrays are clipped to [-1000, 1000], ints taken modulo 97),
so eager and XLA agree bit for bit. Every program is valid Python, but eager may raise on some
inputs (`UnboundLocalError` after a zero-trip loop, `IndexError`, `KeyError`, `StopIteration`):
then the expected behaviour of `to_static` is to raise the same exception type (with the same
message, for the same class), or a
`dy2st.errors.Dy2StaticError` (see `dy2st.testing.fuzz.run_real_program`).

A `numbers-<seed>` stream adds Python numbers the data decides (the numbers rule, DESIGN.md):
a number carried by a staged loop (`for` over `range(n)`, a `while` whose condition reads an
array) that an `if` on array data changes by an int on one path and a float on the other, then
computed on; a step size halved in a staged `while` (`alpha = alpha * 0.5`); and a value picked
by data between a Python int and an array (`max(0, x.sum())`, an `if` giving `3` or `x.min()`),
computed on (`k % 7`, `int(k)`), returned, and stored in `D`, `obj.cache` or the caller's `xs`.

A `boundary-<seed>` stream adds the call boundary (`BOUNDARY_FEATURES`): module globals, a
closure and a counter (`_change()` and `_GLOBALS`, which the runner calls and compares), prints,
f's keyword `s` whose type changes between calls, `finally` discarding exceptions, arguments
changed in place and returned, objects shared in the result.

An `effects-<seed>` stream (`EFFECT_FEATURES`, about one program in three) adds effects a
compiled program must make on every call, in eager's order. Its module code (`effects_header`)
defines `ROUND`, a global `_change()` bumps before each call after the first; `EVENTS`, a list
that a context manager class `Span` and a `@contextlib.contextmanager` generator `span` append
to on entry and exit; `Stats`, whose classmethod `hit` bumps the class attribute `calls`, and its
subclass `Scaled`, which reads the base's `scale` through `self` (`_change()` changes it); a
module-level iterator `IT` (of Python floats, of small arrays, or `itertools.count`); and `BUF`,
an `io.StringIO` that `_change()` replaces, so each call prints into a file of its own. Its
`_GLOBALS` adds `ROUND`, `EVENTS`, `Stats.calls`, `Stats.scale` (dotted: class attributes) and
`BUF` (compared by its text), so the runner loads a fresh module for each path (the iterator
starts over) and compares them after every call. f then draws:

* `raise` in a branch on array data whose message or arguments are made from traced values
  (`ValueError(f"bad {a0.sum()} at {x[0]}")`, `KeyError("bad", y.max())`, `"bad %s" % a1.min()`,
  an f-string of a counter a staged `while` carried, a `Bad(ValueError)` of the user's); most
  tests read `x`/`y` (never reassigned) and `ROUND`, with a constant filled in once the inputs
  are drawn so that eager raises from a chosen call on (or never): the runner compares the
  exception's type and, for the same class, `str(e)`;
* `with Span(t) as sp`/`with span(t) as tg` at f's top level and in branches and loops Python
  decides (`len(EVENTS)`, `ROUND`, a tuple, a `while len(EVENTS) < c`, `range(2)`);
* `Stats.hit()`, `Scaled().apply(v)` (a staged `if` reading `self.scale`), `Scaled().scale`;
* `next(IT)` and `next(IT, default)` at f's top level (the iterator may run out on the last call:
  `StopIteration`);
* an `OrderedDict` and a `Counter` made in f (array and Python values), changed at f's top level
  (`move_to_end`, `update`, `+= 1`) and returned, maybe nested in a list or a dict;
* `print(..., file=BUF)` anywhere, or `print(..., file=ebuf)` of an `io.StringIO` made in f whose
  `getvalue()` f returns;
* `b = b + 2 ** 29` in a loop of at most 3 trips whose trip count may be traced (int32 holds the
  sum), then `pow(p, e, m)` of an int the data decides (small static `e`, `m`);
* a `while True:` loop left only by `return` (one on array data, one after at most 4 trips): f's
  end, or a nested function's.

Context managers, class attributes, the iterator and the dicts' changes are drawn at f's top
level only. The stream names its variables from a counter of its own (`enew`: `esp3`, `eb4`, ...)
and never draws from the other streams, so a seed's other statements, names and inputs are those
it drew before the stream was added.

A `calls-<seed>` stream (`CALL_FEATURES`, about one program in three) adds calls and what they
reach outside f's arguments. Its module code (`calls_header`) defines `TICK`, a global `_change()`
bumps before each call after the first (wrapping the `_change()` the other streams defined);
`_helper(v, k=2.0, *, b=1.0)` and `_bag(v, seen=[])` (which appends to its default list and returns
it), whose `__defaults__`/`__kwdefaults__` `_change()` replaces (or whose default list it grows);
a module list `ITEMS` and dict `REG` (holding a list and a dict) that `_change()` appends to,
rebinds or changes inside; and a class `Knob` (and its subclass `Knob2`) that gains or loses the
class attribute `gain` between calls. Its `_GLOBALS` adds `TICK`, the defaults, `ITEMS`, `REG` and
`Knob.gain`; its `_OUTSIDE` names (by expressions) the objects whose identity the runner compares:
a result that holds `ITEMS`, `REG["lst"]` or `_bag`'s default list must hold that very object,
on every call (and the module's objects must stay the module's). f then draws:

* `try`/`except`/`else` (maybe `finally`) whose body may `return` (f's whole result), `break` or
  `continue` (on array data or a Python test: the loop counter, `TICK`, a length; or always) or
  raise what the `except` catches, in a loop made here (`range(n)`, of a constant 0 to 3, a
  bounded `while`), the loop around, at f's level, or in a nested function; its `else` bumps a
  counter, appends a Python value to a local list, or changes an array, used after;
* calls of `_helper` (its defaults, or `k`/`b` given) and of `_bag`, also in staged branches;
* reads of `ITEMS` and `REG` and Python-valued changes of them; f returns them (nested too);
* `Knob.gain` (through `Knob`, `Knob2`, an instance) read under `try`/`except AttributeError`,
  by `getattr` of a name string (also picked by `TICK`), `getattr` with a default, `hasattr`;
* a `raise ValueError` Python decides (`TICK`, `n`, `len(xs)`) after prints of Python and array
  values and after the caller's `xs` got a Python value appended (popped after it, or at f's end):
  the runner compares the exception, stdout, `xs` and the globals when both raise;
* a Python int an `if` on array data changes (maybe in a loop of zero, one or several trips)
  shifted (`k << 3`, `k << 30`: beyond int32 for some inputs), and `int()`/`round()` of a float
  the data decides (beyond 2**31 for some): eager's Python int, or dy2st's `IntOverflowError`;
* Python effects of every call: writes to the module file `WBUF` (compared by its text; in a
  staged branch too), `sys.stdout.write`, a print naming `sys.stdout`, a class-based context
  manager `_Ctx` that prints in `__enter__`/`__exit__`, a draw of the module's `random.Random`
  `RNGX` (refused in a staged branch);
* a conditional expression whose sides give one list from before it (`log if c else log`, or
  inside a tuple) changed through its result, or two lists (refused where the data decides).

The stream names its variables from a counter of its own (`cnew`: `zc3`, `zl4`, ...) and never
draws from the other streams: `draw_program(seed, calls_stream=False)` gives the program the seed
drew before the stream was added, and so does `draw_program(seed)` where the stream is not drawn.

A `flags-<seed>` stream (`FLAGS_P` per statement) uses Python values the data decides as Python
uses them: a bool flag an `if` on array data sets, tested with `is True`, `is not False` (compared
by value) and counted with `int()`; a float picked by data shown with `repr` and `!r`; and, at f's
top level, a `try`/`finally` whose body raises in a staged branch (a check that fails when the
program runs) and whose `finally` prints (done as eagerly: the call runs eagerly). Its names come
from a counter of its own (`fnew`: `zg3`, ...), so the other streams' programs stay as they were.

A `libs-<seed>` stream (`LIBS_P` per statement) changes a list made in f through library calls in
the two sides of an `if` on array data (`heapq.heappush`, `bisect.insort`, `operator.iadd`, a
list's `append` reached as a value): each side's change is the only one eager makes. Its names
come from `fnew` too; its module imports `bisect`, `heapq` and `operator` where it drew.

A `lazy-<seed>` stream (`LAZY_P` per statement, one of `LAZY_KINDS` each time) draws code where
Python runs some lines only on some data, or skips what a jump or a raise would seem to do:

* a `try`/`except ValueError` (or `with _Sup():`, a class whose `__exit__` returns True) whose body
  has an `if` on array data assigning a local array and a Python int (set before it, or on both
  sides), then `raise ValueError(...)` (always, or where a length decides), the locals used after;
* a `for` over `range(k)` (k 0 to 4, or `n`) whose `try` breaks (on the counter or array data) and
  whose `finally: continue` discards the break, appending Python values or arrays to a local
  list (before the break's test or after it) used after the loop;
* lazy operands whose right side calls a module helper: `ok = <array test> and _lognote(zl)`
  (`_lognote` appends to the list and returns True), the same with `or`, a chain
  `c < a.sum() < _hi(zl)`, a conditional expression whose sides call `_Mark().mark(...)` (which
  sets an attribute of the object made in f), `all`/`any` over a generator of array comparisons
  (`zl.append(i) or v > c`); and each without the effect (`_peek(zl)`, `_Mark().peek(...)`):
  the effectful ones are refused (PythonEffectError), the others give eager's result;
* a `collections.defaultdict(int)`/`(list)` made in f (with keys or none), read or appended
  through a missing key in an `if` on array data (refused), `dd["a"] += 1` on a key it had (in
  the `if` or where Python decides), then summed or returned (in `log`);
* a module helper `_counted` counting its calls in its own attribute (`_counted.calls += 1`) and
  a module made at run time (`_CFG = types.ModuleType("cfg")`), read by f (`x * _CFG.K`,
  `range(_CFG.K)`), both changed by a `_change()` wrapping the other streams' and named in
  `_GLOBALS`, so the runner compares them after every call;
* a `for` over `range(K)` (K 5 to 12) changing an array and a counter `steps = i + 1`, left by a
  break on array data (`(a * i).sum() > c`), both used after.

Its names come from a counter of its own (`lnew`: `lzv3`, `lzl4`, ...) and its module code
(`lazy_header`) is written only for the classes drawn: `draw_program(seed, lazy_stream=False)`
gives the program the seed drew before the stream was added, and so does `draw_program(seed)`
where the stream is not drawn.

A `models-<seed>` stream (`MODELS_P` per statement, one of `MODELS_KINDS` each time) draws code
shaped like model training, of classes dy2st once got wrong:

* gradient clipping over nested dict params made in f (`{"l1": {"w": ..., "b": ...}}`, maybe an
  `"l2"`): `g = jax.grad(_mloss)(p, v)`, its global norm, `if norm > c:` rebinding `g` to a
  `tree_map` of it (or, the effect-free twin, a scale set on each side), the params updated and
  `g` used after; maybe in a loop over `range(n)`, or in a module helper `_mclip_step(p, v, 0.1)`
  beside a Python float; and the refused twin, a nested dict another local holds before an `if`
  that rebinds that local (`h = cache; if ...: h = {...}`);
* items of a list an object's attribute holds (`_MPair(...).b` made in f, or the caller's
  `obj.cache` extended at f's top level), written with constant indices in the sides of an `if`
  on array data, or in a `for`/`while` whose trip count may be traced (`o.b[0] = o.b[0] + i`),
  maybe beside a method changing another item (`o.bump_second()`: refused where staged);
* `print(repr(w))` of weakly typed arrays (`jnp.asarray(1.0)`, `jnp.where(test, 1.0, 2.0)`) and
  of containers holding them (also in a staged `if`), and a module helper `_mshow` given a weak
  array argument printing its repr (stdout compared with eager's);
* a lambda or `functools.partial` kept in a module list `_MTAPE`, dict `_MHOOKS` or object's
  attribute `_MTRAINER.hook`, then called: over the call's traced values (refused at the call, the
  module's objects left as they were), or, at f's top level only, over Python values (as eagerly;
  the list grows on every call), all three named in `_GLOBALS` and compared after every call;
* an attribute whose name a module global has too, the global changed by `_change()` between
  calls: `state.params` of a `_TState` made in f (maybe read by a helper `_mapply`) beside a
  global `params`, and `obj.h`/`obj.count`/`obj.cache` beside globals `h`, `count`, `cache`; some
  statements read the global as well (its changes must be seen).

Its later classes (`MODELS_MORE_KINDS`, `MODELS_MORE_P` per statement) are drawn from a random
stream of their own (`models-more-<seed>`), so the models statements a seed drew before stay:

* `unbound`: a local a staged `if` sets on one side only, read under the same test (on `x`/`y`,
  which f never rebinds, or a flag kept), unconditionally, by `u += ...`; or first set in a loop
  whose trip count may be traced (`range(n)`, an array of length 0 to 3, a `while` on array data),
  read after it; or read in a later iteration before the body sets it (`s = s + prev`, then
  `prev = ...`): eager raises UnboundLocalError on the inputs that leave it unbound, and to_static
  must raise one too (`UndefinedVariableError` when the program runs: a match where the call left
  what eager left);
* `list_both_sides`: the caller's `xs` or `obj.cache` appended to on both sides of a staged `if`
  (`if`/`elif`/`else`, `t += [v]`, through an alias), its length read, more appended, maybe put in
  the returned `log`;
* `new_function`: a nested `def` or lambda returned in `log` (no closure; over a Python int or str;
  from a module helper `_mq_make_adder(k)`; with a mutable default or over a traced `n`: refused);
  the module's `_MQ_FUNCTIONS` makes the runner check each call gives a new function object and
  that calling it gives eager's value;
* `print_repr`: `print(repr(...))` of bool arrays, 0-d bools, arrays numpy summarises
  (`jnp.tile(v, 400)`), empty, int8 and bfloat16 arrays (in a staged `if` too), and a dataclass
  `_MQRec` holding traced arrays printed, then returned;
* `redirect`: prints in `contextlib.redirect_stdout(_MQBUF)` (a module StringIO in `_GLOBALS`: its
  text compared after every call), or the refused twin reading back a local StringIO it printed
  into (`buf.getvalue()`).

Its latest classes (`MODELS_LATE_KINDS`, `MODELS_LATE_P` per statement) are drawn from a stream of
their own (`models-late-<seed>`), so the programs seeds drew before stay as they were. Each reads
module state that a `_change()` (wrapping the ones before) changes between calls, named in
`_GLOBALS` so the runner compares it after every call:

* `implicit_code`: code Python calls by itself reading the globals `_ML_SCALE`/`_ML_LIMIT`: a
  `_MLBox` (the module's `_MLBOX`, or one made in f) with a property `scale`, `__len__`, `__bool__`
  (`if m:`), `__eq__` (`m == 2`), `__getattr__` of a missing `gain`; a descriptor's `__get__`
  (`_MLHOLDER.scale`, `_MLHolder.scale`); used in array arithmetic (`a0 = clip(a0 + m.scale)`), a
  Python `if`, a trip count, an `if` on array data (its side or its test); and the effect twins,
  a property `counted` and `__getattr__` of `tally` bumping the class counter `_MLBox.hits`;
* `passed_function`: module functions reading `_ML_W` handed to `sorted`/`max`/`min` (`key=`),
  `list.sort(key=)`, `map`, `filter`, `functools.reduce` (and a callable object `_MLACC` given to
  `reduce`), over `P` (Python ints) or arrays (`L`, a key on array data), used on arrays;
* `static_config`: a frozen dataclass `_MLCfg` (int, float, str fields and a function `act`) whose
  module instance `_MLCFG` `_change()` rebinds (other values, or equal ones), read in f (`L[:cfg.n]`,
  `* cfg.scale`, `cfg.act(a)`, a helper given it, a Python `if` on its str, an `if` on array data),
  directly, through a local alias or a `dataclasses.replace` of it; sometimes returned in `log`;
* `bound_method`: bound methods of `_MLOBJ` (whose `k`/`w` `_change()` changes) kept in a module
  dict `_MHANDLERS` or global `_MLAPPLY`, or given to a helper (`_ml_call(_MLOBJ.apply, a)`), called
  in f (`a0 = clip(_MHANDLERS["f"](a0))`, a trip count `_MHANDLERS["n"]()`, in a staged `if`); or a
  local object's, kept in a local dict, its attribute changed after;
* `tuple_object`: an `_MLItem` made in f (an int `k`, an array `w`) put in a tuple `t = (o, 2.0)`
  given to a module helper that does `t[0].k += _ML_STEP` (a global `_change()` changes) and returns
  `t[0].k * a` (maybe writing `t[0].w`): once, in a side of a staged `if`, or in a loop of `n` trips;
  `o.k`/`o.w` read after, `o` sometimes returned.

Its last classes (`MODELS_LAST_KINDS`, `MODELS_LAST_P` per statement) are drawn from a stream of
their own (`models-last-<seed>`), so the programs seeds drew before stay as they were. Each is a
class dy2st once got wrong:

* `ternary_own_list`: `lst = [a]` (or two items), then `lst = [clip(a + 1)] if <array test> else lst`
  (or the sides swapped), a list only that name holds, then `lst.append(...)` and reads of it
  (`lst[-1]`, `sum(lst)`, `len(lst)`); and the refused twin, where another local holds the old list
  too (`other = lst` before, read after): whether the append reaches `other` is decided by data,
  so to_static must refuse it;
* `loop_else_return`: module helpers (converted, called from f) whose `for` (over
  `range(v.shape[0])` or the array's items) or `while` (a counter's, or a counter's and array
  data's) returns early on an array test and whose `else:` returns, no `break` (`_mx_find`,
  `_mx_scan`, `_mx_walk`: an index the data picks and an array; `_mx_first`: an array); their results
  used in f (array arithmetic, `k = (k + i) % 97`, an `if` on the index, an item at `i % 3`);
* `counter_while`: `it = 0` / `while <array test> and it < N:` (or the tests swapped; N a constant, or
  `_MX_N`, a global `_change()` changes) with `it += 1` once at the body's top level, changing an array
  (`a0` often: f's gradient, which the runner takes w.r.t. `x`, goes through the loop); maybe a traced
  `break` before the step, or a `continue` after it (which gives no bound: a match or a refusal
  still); the counter and the array used after;
* `math_float`: a Python float an `if` on array data picks (`s = 0.0; if x.sum() > t: s = -2.5`, an
  `if`/`else`, a conditional expression; `-0.0` among the values) given to `math.copysign(1.0, s)` and
  `math.fabs(s)`, used in array arithmetic, an `int()`, a Python-looking `if` (staged), and returned in
  `log`;
* `keyword_only`: module helpers with keyword-only parameters (`_mx_kw(v, *, scale=1.0, flip=False,
  shift=0)`, `_mx_kw_need(v, w, *, k, mode="add")`) called from f with keywords in varying orders
  (or a `**{...}`) and Python values (int, float, bool, str), maybe in a side of an `if` on array data.

Its names come from a counter of its own (`mnew`: `mzp3`, `mzo4`, ...; `mqnew`: `mqu3`, ... for
the later classes; `mlnew`: `mlm3`, ... for the latest; `mxnew`: `mxl3`, `mxit4`, ... for the last)
and its module code (`models_header`, `models_more_header`, `models_late_header`,
`models_last_header`) is written only for the classes drawn: `draw_program(seed,
models_stream=False)` gives the program the seed drew before the stream was added,
`draw_program(seed, models_late_stream=False)` the one it drew before its latest classes were, and
`draw_program(seed, models_last_stream=False)` the one before its last. `draw_models_kind(seed,
kind)` gives one statement of a class alone in a small f (for tests). `python -m
dy2st.testing.fuzz --generator real --stream models` runs only the seeds whose programs the stream
draws in (`--stream models_late`: its latest classes; `--stream models_last`: its last).

The generator uses `random.Random(seed)` (and its named streams) only, so a seed names a program
on every machine.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import random

import numpy as np

from dy2st.testing import real_program_prelude

LIMIT = 1000
INT_MOD = 97
# What the `boundary-<seed>` stream may add to a program (each drawn for about a third of them):
# prints of Python values (also in branches and loops), module globals and a closure's values
# changed between calls (`_change()`), a global counter and list written by f, f's keyword `s`
# whose type changes between calls (1, 1.0, True), exceptions a `finally` discards by
# break/continue/return or `contextlib.suppress` swallows, arguments changed in place and
# returned, and objects shared in the result (`return T, T`, `[[0] * 2] * 2`).
BOUNDARY_FEATURES = ("print", "globals", "counter", "scalar", "finally", "return_arg", "alias", "code")
# What the `effects-<seed>` stream may add to a program (drawn for about a third of them; each
# class for about half of those): a `raise` in a staged branch whose message or arguments are
# made from traced values, taken on some calls only; context managers appending to a module
# list; a class attribute counter bumped by a classmethod and a base class's attribute read
# through `self` (changed between calls); a module-level iterator `next`ed by f; an OrderedDict
# and a Counter made in f and returned; prints to a file (the module's, replaced before each
# call, or one made in f and read back); a Python int grown by `2 ** 29` in a loop with a traced
# trip count, and `pow(k, e, m)`; a `while True:` loop left only by `return`.
EFFECT_FEATURES = ("raise", "ctx", "classattr", "iter", "ordered", "printfile", "bigint", "while_true")
EFFECTS_P = 1 / 3
# What a raise's test reads (x and y are never reassigned in f), and its value for the inputs.
THRESHOLD_EXPRS = {
    "x.sum()": lambda x, y: x.sum(), "y.max()": lambda x, y: y.max(), "x[0]": lambda x, y: x[0],
    "y[-1]": lambda x, y: y[-1], "(x - y).min()": lambda x, y: (x - y).min(),
    "x.max() + y.min()": lambda x, y: x.max() + y.min(),
}
# How often a simple statement is followed by one of `numbers_statement` (a number the data
# decides; each of its three shapes lands in about one program in twenty).
NUMBERS_P = 0.02
FLAGS_P = 0.02  # a statement of the `flags-<seed>` stream
LIBS_P = 0.015  # a statement of the `libs-<seed>` stream
# A statement of the `lazy-<seed>` stream, and its classes: a raise caught (or suppressed) after a
# staged if assigned, a `finally: continue` discarding a break, effects in lazy operands, a
# defaultdict, a function attribute counter and a module made at run time, a counted break.
LAZY_P = 0.05
LAZY_KINDS = ("caught", "finally_continue", "lazy_operand", "defaultdict", "outside_attrs", "counted_break")
# A statement of the `models-<seed>` stream, and its classes: gradient clipping over nested dict
# params (and a nested dict another local holds, rebound in a staged if), items of an attribute's
# list written with constant indices in a staged if or loop (and a method changing another item),
# prints of the repr of weakly typed arrays, lambdas and partials kept in module objects (over
# traced values: refused; over Python values: as eagerly), attributes named like module globals.
MODELS_P = 0.06
# The later classes (drawn from `models-more-<seed>`, so the programs seeds drew before stay as they
# were): a local a staged if or a loop of traced trip count may leave unbound, read after; the
# caller's list appended to on both sides of a staged if; a function made in f returned; reprs of
# bool, summarised, empty, int8 and bfloat16 arrays and of a dataclass printed; prints redirected
# into a module StringIO (or into a local one read back: refused).
MODELS_MORE_P = 0.04
MODELS_FIRST_KINDS = ("grad_clip", "item_attrs", "weak_repr", "kept_closure", "attr_global")
MODELS_MORE_KINDS = ("unbound", "list_both_sides", "new_function", "print_repr", "redirect")
MODELS_KINDS = MODELS_FIRST_KINDS + MODELS_MORE_KINDS
# Its latest classes (drawn from `models-late-<seed>`, so the programs seeds drew before stay as they
# were), each reading module state `_change()` changes between calls: code Python calls by itself
# (a property, `__len__`, `__bool__`, `__eq__`, `__getattr__`, a descriptor; and counting twins);
# module functions passed to `sorted`/`max`/`min`/`list.sort`/`map`/`filter`/`functools.reduce`;
# a frozen dataclass config `_change()` rebinds; a bound method kept in a module dict; an object
# made in f put in a tuple whose int attribute a module helper bumps.
MODELS_LATE_P = 0.04
MODELS_LATE_KINDS = ("implicit_code", "passed_function", "static_config", "bound_method", "tuple_object")
# Its last classes (drawn from `models-last-<seed>`, so the programs seeds drew before stay as they
# were), each a class dy2st once got wrong: a conditional expression giving a new list or the list
# its name held (and the refused twin, where another local holds that list too); a module helper whose
# loop returns early on array data and whose `else:` returns; a `while` bounded by a counter the body
# steps (f's gradient goes through it); `math.copysign`/`math.fabs` of a float the data picks; a
# module helper with keyword-only parameters called with keywords in varying orders.
MODELS_LAST_P = 0.04
MODELS_LAST_KINDS = ("ternary_own_list", "loop_else_return", "counter_while", "math_float", "keyword_only")
# What the `calls-<seed>` stream may add to a program (drawn for about a third of them; each class
# for about half of those): `try`/`except`/`else` (and `finally`) whose body returns, breaks or
# continues (on array data or Python's) and whose `else` has effects; module helpers with
# defaults and a mutable default list that `_change()` replaces between calls; module objects
# (a list, a dict, one nested in a dict, a default list) f returns, their identity compared
# (`_OUTSIDE`); a class attribute `_change()` sets or deletes, read under `except AttributeError`
# and by `getattr` of a name string; a Python-decided `raise` after prints and changes of `xs`;
# Python ints the data decides shifted (`<<`) and `int()`/`round()` of a float the data decides.
CALL_FEATURES = ("try_else", "defaults", "outside", "attr", "py_raise", "int_ops", "streams", "ternary")
CALLS_P = 1 / 3

def _prelude() -> str:
    """The source of `real_program_prelude` after its docstring: State, Ctx and clip."""
    source = inspect.getsource(real_program_prelude)
    first = ast.parse(source).body[1].lineno  # the statement after the docstring
    return "".join(source.splitlines(keepends=True)[first - 1:]) + "\n"


PRELUDE = _prelude()


@dataclasses.dataclass
class RealProgram:
    """A generated module's source and the inputs to call its `f(x, y, n, xs, obj)` with."""

    seed: int
    source: str
    x: np.ndarray
    y: np.ndarray
    n: int
    n_as_array: bool
    xs: list  # numpy float32[3] arrays; the runner gives each call its own jnp copies
    # Drawn by the `boundary-<seed>` stream: f's keyword `s` for each call (a Python scalar whose
    # type changes between calls: 1, 1.0, True), and `n` for each call where it varies (1, True).
    s_values: tuple = ()
    n_values: tuple = ()

    def inputs_text(self) -> str:
        return (f"x={self.x.tolist()} y={self.y.tolist()} n={self.n} n_as_array={self.n_as_array} "
                f"xs={[v.tolist() for v in self.xs]} s_values={self.s_values} n_values={self.n_values}")


@dataclasses.dataclass
class _Scope:
    """What a block may read and write."""

    arrays: list  # writable float32[3] variables
    ints: list  # writable int variables (Python ints; may become int arrays when mixed)
    int_reads: list  # read-only ints (loop counters)
    scalar_reads: list  # read-only array scalars (elements of an array being iterated)
    frozen: frozenset = frozenset()  # lists being iterated: the body must not resize them
    loop_depth: int = 0
    in_function: bool = False  # inside a nested def: no break/continue/return out of it

    def child(self, **changes) -> "_Scope":
        return dataclasses.replace(self, **changes)


class _Generator:
    MAX_DEPTH = 3

    def __init__(self, rng: random.Random, extra: random.Random, later: random.Random, mangled: random.Random,
                 classes: random.Random, boundary: random.Random | None = None,
                 numbers: random.Random | None = None, effects: random.Random | None = None,
                 items: random.Random | None = None, calls: random.Random | None = None,
                 flags: random.Random | None = None, libs: random.Random | None = None,
                 lazy: random.Random | None = None, models: random.Random | None = None,
                 models_more: random.Random | None = None, models_late: random.Random | None = None,
                 models_last: random.Random | None = None):
        self.rng = rng
        # Draw the statements added after the campaigns' seeds were pinned (`extra_statement`),
        # so each seed keeps the statements `rng` (and `extra`, `later`) drew for it before.
        self.extra = extra
        self.later = later
        self.mangled = mangled
        self.classes = classes
        # The call boundary (see `BOUNDARY_FEATURES`): drawn from `boundary` only, so each seed
        # keeps the statements the other streams drew for it.
        self.boundary = boundary or random.Random(0)
        # Python numbers the data decides (`numbers_statement`), drawn from `numbers` only.
        self.numbers = numbers or random.Random(0)
        # Effects at the call boundary (`EFFECT_FEATURES`), drawn from `effects` only; their
        # names come from a counter of their own (`enew`), so the other streams' names stay.
        self.effects = effects or random.Random(0)
        # Items written with a computed key (`item_write`), drawn from `items` only.
        self.items = items or random.Random(0)
        # Calls and their boundary (`CALL_FEATURES`), drawn from `calls` only; names from `cnew`.
        self.calls = calls or random.Random(0)
        # Python values the data decides used as Python uses them (`flags_statement`), drawn from
        # `flags` only; names from `fnew`.
        self.flags = flags or random.Random(0)
        self.ffresh = 0
        # Lists changed through library calls in staged sides (`libs_statement`), drawn from `libs` only.
        self.libs = libs or random.Random(0)
        self.libs_drawn = False
        # Raises, jumps, lazy operands, defaultdicts and outside attributes (`lazy_statement`),
        # drawn from `lazy` only; names from a counter of their own (`lnew`); the module code
        # each class needs (`lazy_header`) written only where drawn.
        self.lazy = lazy or random.Random(0)
        self.lazy_on = lazy is not None
        self.lfresh = 0
        self.lazy_needs: set = set()
        # Code shaped like model training (`models_statement`), drawn from `models` only; names
        # from a counter of their own (`mnew`); its module code (`models_header`) written only
        # where drawn.
        self.models = models or random.Random(0)
        self.models_on = models is not None
        self.mfresh = 0
        self.models_needs: set = set()
        # ... and its later classes, drawn from `models_more` only (so a seed's models statements
        # stay those it drew before), named from a counter of their own (`mqnew`).
        self.models_more = models_more or random.Random(0)
        self.models_more_on = models_more is not None
        self.mqfresh = 0
        self.mq_needs: set = set()
        self.mq_tail: list[str] = []  # what f appends to its returned `log` just before it returns
        # ... and its latest classes, drawn from `models_late` only, named from `mlnew`; the module
        # code each needs (`models_late_header`) written only where drawn.
        self.models_late = models_late or random.Random(0)
        self.models_late_on = models_late is not None
        self.mlfresh = 0
        self.ml_needs: dict = {}  # need -> the variant of `_change()` drawn when it was first needed
        self.ml_tail: list[str] = []
        # ... and its last classes, drawn from `models_last` only, named from `mxnew`; the module
        # code each needs (`models_last_header`) written only where drawn.
        self.models_last = models_last or random.Random(0)
        self.models_last_on = models_last is not None
        self.mxfresh = 0
        self.mx_needs: dict = {}  # need -> the variant of `_change()` drawn when it was first needed
        self.call_features: frozenset = frozenset()
        self.call_shown: set = set()
        self.cfresh = 0
        self.call_tail: list[str] = []  # the Python-decided raise f makes just before it returns
        self.effect_features: frozenset = frozenset()
        self.effect_shown: set = set()
        self.efresh = 0
        self.next_calls = 0  # how many `next(IT)` f makes per call (sizes the iterator)
        self.thresholds: list = []  # (placeholder, expression of x/y, call index from which it raises)
        self.tail: list[str] = []  # numbers f stores in the caller's `xs` just before it returns
        self.features: frozenset = frozenset()
        self.returned: list[str] = []  # extra return values (arguments, aliases, scalars, globals)
        self.shown: set = set()  # the features some statement shows so far
        self.budget = rng.randint(5, 16)
        self.fresh = 0
        self.lines: list[str] = []
        self.late: list[str] = []  # arrays first set inside a loop body, readable afterwards

    # -- small draws ------------------------------------------------------------------
    def pick(self, options):
        return self.rng.choice(list(options))

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def new(self, root: str) -> str:
        self.fresh += 1
        return f"{root}{self.fresh}"

    def emit(self, indent: int, text: str) -> None:
        for line in text.split("\n"):
            self.lines.append("    " * indent + line)

    # -- expressions ------------------------------------------------------------------
    def arr(self, s: _Scope) -> str:
        return self.pick(s.arrays + ["x", "y"])

    def int_atom(self, s: _Scope) -> str:
        if self.chance(0.25):
            return str(self.rng.randint(-2, 5))
        return self.pick(s.ints + s.int_reads)

    def scalar(self, s: _Scope) -> str:
        """A number: Python int, or a traced array scalar."""
        kind = self.rng.randint(0, 6)
        if kind == 0 and s.scalar_reads:
            return self.pick(s.scalar_reads)
        if kind == 1:
            return f"{self.arr(s)}.sum()"
        if kind == 2:
            return f"{self.arr(s)}[{self.rng.randint(-3, 2)}]"
        if kind == 3:
            return f"{self.arr(s)}.{self.pick(['max', 'min'])}()"
        if kind == 4:
            return "obj.count"
        return self.int_atom(s)

    def arr_expr(self, s: _Scope, depth: int = 0) -> str:
        if depth >= 2 or self.chance(0.3):
            return self.arr(s)
        sub = lambda: self.arr_expr(s, depth + 1)  # noqa: E731
        kind = self.rng.randint(0, 16)
        if kind == 0:
            return f"({sub()} + {sub()})"
        if kind == 1:
            return f"({sub()} - {self.arr(s)})"
        if kind == 2:
            return f"({self.arr(s)} * {self.pick(['2', '-1', '3', '2.0'])})"
        if kind == 3:
            return f"({sub()} + {self.scalar(s)})"  # array + Python or traced number
        if kind == 4:
            return f"L[{self.pick(['-1', '0', '-2 % max(len(L), 1)', 'len(L) // 2'])}]"
        if kind == 5:
            return f"sum(L[{self.pick(['-2:', ':2', '1:', '::-1', ':'])}], {self.arr(s)})"
        if kind == 6:
            return f'D.get("{self.pick(["a", "b"])}", {self.arr(s)})'
        if kind == 7:
            return f"xs[{self.pick(['0', '-1'])}]"
        if kind == 8 and self.chance(0.3):
            return f"{self.pick(['max', 'min'])}({sub()}, {self.arr(s)}, key=lambda v: v.sum())"
        if kind == 9:
            return f"abs({sub()})"
        if kind == 10:
            return "obj.h"
        if kind == 11:
            return f"{self.arr(s)}[::-1]"
        if kind == 12:
            return f"divmod({sub()}, {self.pick(['3', '4.0'])})[{self.rng.randint(0, 1)}]"
        if kind == 13 and self.late:
            return self.pick(self.late)
        if kind == 14:
            return f"jnp.where({self.arr(s)} > {self.rng.randint(-2, 3)}, {sub()}, {sub()})"
        if kind == 15:
            return f"({sub()} * ({self.int_atom(s)} % 3))"
        return f"({self.arr(s)} + {self.int_atom(s)})"

    def int_expr(self, s: _Scope, depth: int = 0) -> str:
        if depth >= 2 or self.chance(0.3):
            return self.int_atom(s)
        sub = lambda: self.int_expr(s, depth + 1)  # noqa: E731
        kind = self.rng.randint(0, 12)
        if kind == 0:
            return f"(({sub()} + {sub()}) % {INT_MOD})"
        if kind == 1:
            return "len(L)"
        if kind == 2:
            return "len(xs)"
        if kind == 3:
            return f"{self.pick(['max', 'min'])}({sub()}, {sub()})"
        if kind == 4:
            return f"abs({sub()} - {self.rng.randint(0, 6)})"
        if kind == 5:
            return f"sum(P{self.pick(['', '[1:]', '[-2:]'])}) % {INT_MOD}"
        if kind == 6:
            return f"sorted(P)[{self.pick(['0', '-1', 'len(P) // 2'])}]"
        if kind == 7:
            return f"divmod({sub()}, {self.pick(['2', '3', '5'])})[{self.rng.randint(0, 1)}]"
        if kind == 8:
            return f"round({sub()} / 2)"
        if kind == 9:
            return f"(({sub()} + ({self.arr(s)}.sum() > {self.rng.randint(0, 6)})) % {INT_MOD})"  # mixed
        if kind == 10:
            return 'D["k"]'
        if kind == 11:
            return "obj.count"
        return f"P[{self.pick(['-1', '0', 'len(P) - 1'])}]"

    def cond(self, s: _Scope, depth: int = 0) -> str:
        if depth == 0 and self.chance(0.2):
            op = self.pick(["and", "or"])
            return f"{self.cond(s, 1)} {op} {self.cond(s, 1)}"
        kind = self.rng.randint(0, 11)
        cmp = self.pick(["<", "<=", ">", ">="])
        if kind <= 2:  # traced
            return f"{self.scalar(s)} {cmp} {self.rng.randint(-2, 6)}"
        if kind == 3:
            return f"({self.arr(s)} {cmp} {self.arr(s)}).{self.pick(['any', 'all'])}()"
        if kind == 4:
            return f"len(L) {cmp} {self.rng.randint(1, 4)}"
        if kind == 5:
            return f"len(xs) {cmp} {self.rng.randint(1, 4)}"
        if kind == 6:
            return f"{self.pick(['n', 'obj.count', 'len(obj.cache)'])} {cmp} {self.rng.randint(0, 2)}"
        if kind == 7:
            return f'"{self.pick(["b", "c"])}" in D'
        if kind == 8:
            return f"{self.int_expr(s)} % 2 == {self.rng.randint(0, 1)}"
        if kind == 9:
            return f"not {self.cond(s, depth + 1)}"
        if kind == 10:
            return f"{self.int_atom(s)} {cmp} {self.rng.randint(0, 4)}"
        return f"{self.pick(['max', 'min'])}({self.scalar(s)}, {self.scalar(s)}) {cmp} {self.rng.randint(-1, 5)}"

    # -- statements -------------------------------------------------------------------
    def block(self, s: _Scope, indent: int, depth: int, count: int | None = None) -> None:
        count = count if count is not None else self.rng.randint(1, 3)
        emitted = 0
        while emitted < count or (emitted == 0):
            self.statement(s, indent, depth)
            emitted += 1
            if self.budget <= 0:
                break

    def statement(self, s: _Scope, indent: int, depth: int) -> None:
        self.budget -= 1
        if depth < self.MAX_DEPTH and self.budget > 0 and self.chance(0.35):
            self.compound(s, indent, depth)
        else:
            self.simple(s, indent)

    def simple(self, s: _Scope, indent: int) -> None:  # noqa: C901 - one template per branch
        a = self.pick(s.arrays)
        k = self.pick(s.ints)
        can_resize_L = "L" not in s.frozen
        can_resize_xs = "xs" not in s.frozen
        kind = self.rng.randint(0, 44)
        if kind <= 3:
            self.emit(indent, f"{a} = clip({self.arr_expr(s)})")
        elif kind <= 5:
            self.emit(indent, f"{k} = {self.int_expr(s)} % {INT_MOD}")
        elif kind == 6 and can_resize_L:
            self.emit(indent, f"L.append(clip({self.arr_expr(s)}))")
        elif kind == 7 and can_resize_L:
            if self.chance(0.8):
                self.emit(indent, f"if len(L) > 1:\n    {a} = clip({a} + L.pop())")
            else:
                self.emit(indent, f"{a} = L.pop({self.pick(['0', '-1'])})")  # may raise IndexError
        elif kind == 8:
            self.emit(indent, f"L[{self.pick(['-1', '0'])}] = clip({self.arr_expr(s)})")
        elif kind == 9:
            self.emit(indent, f'D["{self.pick(["a", "b", "c"])}"] = clip({self.arr_expr(s)})')
        elif kind == 10:
            self.emit(indent, f'D.update(k=({self.int_expr(s)}) % {INT_MOD})')
        elif kind == 11:
            self.emit(indent, f'{a} = clip({a} + D.get("c", D["a"]))')
        elif kind == 12:
            t = self.new("t")
            self.emit(indent, f"{t} = ({self.arr(s)}, {self.int_expr(s)})\n{a}, {k} = clip({t}[0] + {t}[1]), {t}[1] % {INT_MOD}")
        elif kind == 13:
            b = self.pick(s.arrays)
            self.emit(indent, f"{a}, {b} = {b}, {a}")
        elif kind == 14:
            self.emit(indent, f"{k} = obj.bump({self.arr_expr(s)}) % {INT_MOD}")
        elif kind == 15:
            self.emit(indent, f"{k} = obj.remember({self.pick([self.arr(s), self.int_atom(s)])}) % {INT_MOD}")
        elif kind == 16:
            self.emit(indent, f"{a} = clip({a} + obj.h * {self.rng.randint(-1, 2)})")
        elif kind == 17 and can_resize_xs:
            self.emit(indent, f"xs.append(clip({self.arr_expr(s)}))")
        elif kind == 18:
            self.emit(indent, f"xs[{self.pick(['0', '-1'])}] = clip({self.arr_expr(s)})")
        elif kind == 19 and can_resize_xs:
            self.emit(indent, f"if len(xs) > 1:\n    {a} = clip({a} - xs.pop())")
        elif kind == 20:
            g = self.new("g")
            self.emit(indent, f"{g} = lambda v: clip(v * 2 + {self.pick(s.ints + s.int_reads + ['1'])})\n{a} = {g}({self.arr_expr(s)})")
        elif kind == 21:
            self.emit(indent, f"FN.append(lambda v: clip(v + {self.pick(s.ints + s.int_reads + s.arrays)}))")
        elif kind == 22:
            self.emit(indent, f"for fn in FN:\n    {a} = fn({a})")
        elif kind == 23 and not s.in_function:
            self.nested_def(s, indent)
        elif kind == 24:
            self.emit(indent, f"{k} = (P.index(P[-1]) + {self.int_atom(s)}) % {INT_MOD}")
        elif kind == 25 and "P" not in s.frozen:
            self.emit(indent, f"P.append(({self.int_expr(s)}) % {INT_MOD})")
        elif kind == 26:
            self.emit(indent, f"{k} = (sum(sorted(P)[-2:]) + {self.pick(['max', 'min'])}(P)) % {INT_MOD}")
        elif kind == 27:
            self.emit(indent, f"{a} = clip({a} + round({self.scalar(s)}))")
        elif kind == 28:
            q, r = self.new("q"), self.new("r")
            self.emit(indent, f"{q}, {r} = divmod({self.int_expr(s)} + 7, {self.pick(['2', '3', '5'])})\n{k} = ({q} * 3 + {r}) % {INT_MOD}")
        elif kind == 29:
            self.emit(indent, f"{a} = clip({a} + {self.pick(['max', 'min'])}({self.scalar(s)}, {self.scalar(s)}))")
        elif kind == 30:
            self.emit(indent, f"{a} = clip({a} * {self.pick(['abs', 'round'])}({self.int_expr(s)} - 3) % 5)")
        elif kind == 31 and self.late:
            self.emit(indent, f"{a} = clip({a} + {self.pick(self.late)})")  # may be unbound
        elif kind == 32:
            self.emit(indent, f"log.append({self.int_atom(s)})")
        elif kind == 33:  # eager: the Python number or the array, by data
            self.emit(indent, f"{k} = {self.pick(['max', 'min'])}({self.int_expr(s)}, {self.scalar(s)}{self.pick(['', ', 0.5'])})")
        elif kind == 34:
            self.emit(indent, f"{k} = sorted([{self.scalar(s)}, {self.int_atom(s)}, {self.scalar(s)}])[{self.pick(['0', '-1', '1'])}]")
        elif kind == 35:
            self.emit(indent, f"if {self.cond(s)}:\n    {k} = {self.scalar(s)}\nelse:\n    {k} = {self.pick([self.int_atom(s), '0.5', 'True'])}")
        elif kind == 36:  # an int-or-array choice computed with an array: float32 either way
            self.emit(indent, f"{a} = clip({a} * {self.pick(['max', 'min'])}({k}, {self.scalar(s)}))")
        elif kind == 37:  # ... cast: a Python int either way
            self.emit(indent, f"{k} = int({self.pick(['max', 'min'])}({self.int_expr(s)}, {self.scalar(s)})) % {INT_MOD}")
        elif kind == 38:  # an int-or-array choice an inner if assigns without changing it
            keep = self.pick([f"{k} = {k}", f"for _ in range(0):\n            {k} = 2"])
            self.emit(indent, f"{k} = {self.pick(['max', 'min'])}({self.int_expr(s)}, {self.scalar(s)})\n"
                              f"if {self.cond(s)}:\n    if {self.cond(s)}:\n        {keep}\n        {a} = clip({a} * 2)\n"
                              f"    else:\n        {a} = clip({a} - 1)")
        elif kind == 39:  # a registered pytree object of the state changed in place
            self.emit(indent, f"obj.acc.w = clip(obj.acc.w * {self.pick(['2', '-1', '0.5'])} + {self.arr(s)})")
        elif kind == 40 and indent == 1:  # ... or given a new one (not where the data decides: docs/limitations.md)
            self.emit(indent, f"obj.acc = Acc(clip(obj.acc.w - {self.arr(s)}))")
        elif kind == 41:
            self.emit(indent, f"{a} = clip({a} + obj.acc.w)")
        elif kind == 42:  # an array appended in place to the list a `Ctx` also holds (a scan stacks it)
            self.emit(indent, f"log.append(clip({self.arr_expr(s)}))")
        elif kind == 43:  # the same by augmented assignment (in place, as `extend`)
            self.emit(indent, f"log += [clip({self.arr_expr(s)})]")
        elif kind == 44:  # a dict changed in place; `DD` is another reference to it
            self.emit(indent, f'D |= {{"a": clip({self.arr_expr(s)})}}')
        else:
            self.emit(indent, f"{a} = clip({a} + {self.pick(['L[-1]', 'L[0]', 'xs[-1]', 'obj.h', 'sum(L[-2:], x)'])})")
        self.extra_statement(s, indent)

    def extra_statement(self, s: _Scope, indent: int) -> None:
        """Sometimes one or two more statements, drawn from `extra` and `later` only."""
        main = self.rng
        try:
            if self.extra.random() < 0.04:
                self.rng = self.extra
                if self.chance(0.5):
                    self.aliased_append(s, indent)
                else:
                    self.in_place_change(s, indent)
            if self.later.random() < 0.03:
                self.rng = self.later
                self.list_made_here_held_twice(s, indent)
            if self.later.random() < 0.03:
                self.rng = self.later
                self.dict_in_insertion_order(s, indent)
            if self.mangled.random() < 0.04:
                self.rng = self.mangled
                a = self.pick(s.arrays)  # a method writing private (mangled) names in an if and a loop
                self.emit(indent, f"{a} = clip({a} + obj.shift({self.arr_expr(s)}))")
            if self.classes.random() < 0.03:
                self.rng = self.classes
                self.local_class(s, indent)
            if self.classes.random() < 0.03:
                self.rng = self.classes
                a = self.pick(s.arrays)  # a method calling super() in an if and a loop
                self.emit(indent, f"{a} = clip({a} + obj.climb({self.arr_expr(s)}))")
            if self.items.random() < 0.04:
                self.rng = self.items
                self.item_write(s, indent)
            if self.numbers.random() < NUMBERS_P:
                self.rng = self.numbers
                self.numbers_statement(s, indent)
            if self.flags.random() < FLAGS_P:
                self.rng = self.flags
                self.flags_statement(s, indent)
            if self.libs.random() < LIBS_P:
                self.rng = self.libs
                self.libs_statement(s, indent)
            if self.lazy_on and self.lazy.random() < LAZY_P:
                self.rng = self.lazy
                self.lazy_statement(s, indent)
            if self.models_on and self.models.random() < MODELS_P:
                self.rng = self.models
                self.models_statement(s, indent)
            if self.models_more_on and self.models_more.random() < MODELS_MORE_P:
                self.rng = self.models_more
                self.models_statement(s, indent, only=self.pick(MODELS_MORE_KINDS))
            if self.models_late_on and self.models_late.random() < MODELS_LATE_P:
                self.rng = self.models_late
                self.models_statement(s, indent, only=self.pick(MODELS_LATE_KINDS))
            if self.models_last_on and self.models_last.random() < MODELS_LAST_P:
                self.rng = self.models_last
                self.models_statement(s, indent, only=self.pick(MODELS_LAST_KINDS))
            if self.features:
                self.rng = self.boundary
                self.boundary_statement(s, indent)
            if self.effect_features:
                self.rng = self.effects
                self.effects_statement(s, indent)
            if self.call_features:
                self.rng = self.calls
                self.calls_statement(s, indent)
        finally:
            self.rng = main

    # -- Python numbers the data decides (the `numbers-<seed>` stream) ------------------------
    def numbers_statement(self, s: _Scope, indent: int) -> None:
        """One of three shapes of a Python number whose value traced data decides (the numbers
        rule: to_static gives it back as a 0-d array of eager's value)."""
        kind = self.rng.randint(0, 2)
        if kind == 0:
            self.carried_number(s, indent)
        elif kind == 1:
            self.halved_step(s, indent)
        else:
            self.number_or_array(s, indent)

    def traced_test(self, s: _Scope, counter: str) -> str:
        """A test on array data that may change from one iteration to the next."""
        arr, c = self.arr(s), self.rng.randint(-2, 4)
        return self.pick([f"{arr}[{counter} % 3] > {c}", f"({arr} * {counter}).sum() > {c}",
                          f"{arr}.sum() + {counter} > {c}", f"({arr} > {counter}).any()",
                          f"{arr}.{self.pick(['max', 'min'])}() > {c}"])

    def use_number(self, s: _Scope, indent: int, v: str, count: int) -> None:
        """`count` statements computing on the number `v`, returning or storing it."""
        options = [f"{self.pick(s.ints)} = ({v} * 2) % {INT_MOD}", f"{self.pick(s.ints)} = {v} % 3",
                   f"{self.pick(s.arrays)} = clip({self.pick(s.arrays)} + {v} + {self.arr(s)}.sum())",
                   f"{self.pick(s.arrays)} = clip({self.arr(s)} * {v})", f"log.append({v})",
                   f"obj.cache.append({v} + 1)", f'D["k"] = {v}', f"{self.pick(s.ints)} = {v}",
                   f"if {v} > {self.rng.randint(-1, 2)}:\n    {self.pick(s.arrays)} = clip({self.arr(s)} - 1)"]
        for text in self.rng.sample(options, count):
            self.emit(indent, text)

    def carried_number(self, s: _Scope, indent: int) -> None:
        """A Python number carried by a staged loop, changed on paths an `if` on array data picks
        by an int on one and a float on the other (`acc += 1` / `acc -= 0.5`), used after it."""
        acc, a = self.new("acc"), self.pick(s.arrays)
        self.emit(indent, f"{acc} = {self.pick(['0', '0', '1', '2'])}")
        if self.chance(0.5):
            i = self.new("i")
            self.emit(indent, f"for {i} in range({self.pick(['n', 'n', 'n + 1', '3'])}):")
        else:
            i = self.new("w")
            arr, c = self.arr(s), self.rng.randint(-3, 3)
            test = self.pick([f"{arr}.sum() > {c}", f"({arr} > {c}).any()", f"{acc} < {arr}.max()"])
            bound = self.pick(["n", "3", "4"])
            self.emit(indent, f"{i} = 0\nwhile {i} < {bound} and {test}:" if self.chance(0.5)
                      else f"{i} = 0\nwhile {test} and {i} < {bound}:")
            self.emit(indent + 1, f"{i} += 1")
        up = self.pick([f"{acc} += 1", f"{acc} += 1", f"{acc} = {acc} + 2", f"{acc} += 1.5"])
        down = self.pick([f"{acc} -= 0.5", f"{acc} -= 0.5", f"{acc} = {acc} * 0.5", f"{acc} += 0.25", f"{acc} -= 1"])
        inner = s.child(int_reads=s.int_reads + [i], loop_depth=s.loop_depth + 1)
        if self.chance(0.8):
            self.emit(indent + 1, f"if {self.traced_test(inner, i)}:\n    {up}\nelse:\n    {down}")
        else:  # only one path changes it
            self.emit(indent + 1, f"if {self.traced_test(inner, i)}:\n    {self.pick([up, down])}")
        if self.chance(0.4):
            self.emit(indent + 1, f"{a} = clip({a} - {self.pick(['1', 'y', acc])})")
        if self.chance(0.2):
            self.emit(indent + 1, f"if {self.traced_test(inner, i)}:\n    {self.pick(['break', 'continue'])}")
        self.use_number(s, indent, acc, self.rng.randint(1, 3))
        if self.chance(0.3):  # eager raises ZeroDivisionError where the data left it 0
            self.emit(indent, f"{a} = clip({a} + {self.pick(['6', '1.5', '7'])} {self.pick(['/', '//', '%'])} {acc})")

    def halved_step(self, s: _Scope, indent: int) -> None:
        """A step size halved in a staged `while` whose condition reads arrays (a line search)."""
        alpha, w, a = self.new("alpha"), self.new("w"), self.pick(s.arrays)
        arr, c = self.arr(s), self.rng.randint(-2, 3)
        self.emit(indent, f"{alpha} = {self.pick(['1', '1', '2', '1.0'])}\n{w} = 0")
        value = self.pick([f"({arr} * {alpha}).sum()", f"abs(({arr} * {alpha}).sum())", f"({arr} * {alpha}).max()"])
        self.emit(indent, f"while {value} > {c} and {w} < {self.pick(['n', '3', '4', 'n + 2'])}:")
        self.emit(indent + 1, f"{w} += 1\n{alpha} = {alpha} * 0.5")
        if self.chance(0.4):
            self.emit(indent + 1, f"{a} = clip({a} - {alpha} * {self.arr(s)})")
        self.use_number(s, indent, alpha, self.rng.randint(1, 3))

    def number_or_array(self, s: _Scope, indent: int) -> None:
        """A value picked by data between a Python int and an array, computed on, returned, and
        stored (in `D`, the caller's `obj.cache`, or the caller's `xs` just before returning)."""
        k, arr = self.new("kk"), self.arr(s)
        kind = self.rng.randint(0, 3)
        if kind == 0:
            self.emit(indent, f"{k} = {self.pick(['max', 'min'])}({self.pick(['0', '1', '3'])}, {arr}.{self.pick(['sum', 'max', 'min'])}())")
        elif kind == 1:
            self.emit(indent, f"{k} = {self.pick(['max', 'min'])}({self.int_atom(s)}, {arr}[{self.rng.randint(-3, 2)}])")
        elif kind == 2:
            self.emit(indent, f"if {arr}.sum() > {self.rng.randint(-2, 4)}:\n    {k} = {self.pick(['3', '0', '2'])}\n"
                              f"else:\n    {k} = {self.arr(s)}.{self.pick(['min', 'max', 'sum'])}()")
        else:
            self.emit(indent, f"{k} = {self.pick(['3', '1'])} if {arr}.sum() > {self.rng.randint(-2, 4)} else {self.arr(s)}.min()")
        computed = self.pick([f"({k} % 7)", f"({k} + 1)", f"int({k})", f"({k} * 2 - 1)", f"(-{k})", f"({k} // 2)"])
        if self.chance(0.5):
            t = self.new("kc")
            self.emit(indent, f"{t} = {computed}")
            computed = t
        self.use_number(s, indent, computed, self.rng.randint(1, 2))
        if indent == 1 and self.chance(0.4):  # always bound there: the caller's list holds it after the call
            self.tail.append(f"xs.append({self.pick([k, computed])})")

    # -- the call boundary (the `boundary-<seed>` stream) ---------------------------------
    def draw_features(self) -> None:
        """Which boundary classes this program draws (each about one program in three)."""
        b = self.boundary
        self.features = frozenset(name for name in BOUNDARY_FEATURES if b.random() < 0.3)
        if "return_arg" in self.features:
            self.returned += b.sample(["xs", "obj.cache", "obj"], b.randint(1, 2))
        if "alias" in self.features:
            self.returned += b.sample(["T, T", "[T] * 2", "{'p': T, 'q': T}", "GRID", "[L, L]", "[[0] * 2] * 2"],
                                      b.randint(1, 2))
        if "scalar" in self.features:
            self.returned += b.sample(["s", "s * 2", "type(s).__name__", "-s", "s / 2"], b.randint(1, 2))
        if "counter" in self.features:
            self.returned += b.sample(["COUNTER", "list(HIST)"], b.randint(1, 2))
        if "globals" in self.features:
            self.returned += b.sample(["G", "CFG['k']", "_get()"], 1)

    def module_header(self) -> str:
        """Module-level code before `f`: globals, a closure, `_change()` (the runner calls it
        before each call after the first), `_GLOBALS` (the names whose values it compares)."""
        return (self.boundary_header() + (self.effects_header() if self.effect_features else "")
                + (self.calls_header() if self.call_features else "")
                + ("\nimport bisect\nimport heapq\nimport operator\n" if self.libs_drawn else "")
                + self.lazy_header() + self.models_header() + self.models_more_header()
                + self.models_late_header() + self.models_last_header())

    def boundary_header(self) -> str:
        """The boundary stream's module-level code (see `module_header`)."""
        if not self.features:
            return ""
        lines = ["import contextlib", "", "G = 2", 'CFG = {"k": 3}', "COUNTER = 0", "HIST = []", "", "",
                 "def _make():", '    box = {"k": 1}', "    m = 2", "", "    def get():",
                 '        return box["k"] + m', "", "    def bump():", "        nonlocal m",
                 '        box["k"] += 2', "        m = m * 2 % 7", "", "    return get, bump", "", "",
                 "_get, _bump = _make()", ""]
        code = []
        if "code" in self.features:  # code rebound between calls: a helper defined again, a patched method
            lines += ["", "def _scale_a(v):", "    return v * 2", "", "", "def _scale_b(v):", "    return v - 1", "", "",
                      "_scale = _scale_a", "State.scaled = staticmethod(_scale)", ""]
            code = ["    global _scale", "    _scale = _scale_b if _scale is _scale_a else _scale_a",
                    "    State.scaled = staticmethod(_scale)"]
            if "globals" not in self.features:
                lines += ["", "def _change():", *code, ""]
        if "globals" in self.features:
            lines += ["", "def _change():", *code, "    global G", "    G = G + 1", '    CFG["k"] = (CFG["k"] * 2) % 7',
                      "    _bump()", "    State.rate = State.rate % 3 + 1", ""]
        lines += ['', '_GLOBALS = ("G", "CFG", "COUNTER", "HIST", "State.rate")', ""]
        return "\n".join(lines) + "\n"

    def signature(self) -> str:
        return "def f(x, y, n, xs, obj, s=1):" if "scalar" in self.features else "def f(x, y, n, xs, obj):"

    def prologue(self) -> str:
        """Lines after f's fixed first block (drawing nothing)."""
        lines = []
        if "counter" in self.features:
            lines.insert(0, "global COUNTER")
        if "alias" in self.features:
            lines.append("T = [k0]")
        return "\n".join(lines)

    def return_text(self, out: str = "out") -> str:
        """f's return (also given by a `return` in a `finally`, before `out` is set: `out` is
        then the expression that sets it): the base tuple and the extras."""
        prep = []
        if "GRID" in self.returned:
            prep.append("GRID = [[k0 % 3] * 2] * 2\nGRID[0][1] = 7")
        extras = "".join(", " + value for value in self.returned)
        return "\n".join(prep + [f"return a0, a1, k0, k1, L, D, {out}, log, P, DD{extras}"])

    def py_int(self, s: _Scope) -> str:
        """An int eager always has as a Python int (a bool or float for `s`)."""
        options = ["len(L)", "len(xs)", "len(log)", "len(P)", "obj.count", "n", str(self.rng.randint(0, 9))]
        options += s.int_reads
        if "globals" in self.features:
            options += ["G", "CFG['k']", "_get()"]
        if "counter" in self.features:
            options += ["COUNTER", "len(HIST)"]
        if "scalar" in self.features:
            options += ["s"]
        return self.pick(options)

    def boundary_statement(self, s: _Scope, indent: int, only: str | None = None) -> None:
        """Sometimes a statement of a boundary class this program draws (`self.rng` is the
        boundary stream here); with `only`, one statement of that class."""
        f = self.features if only is None else {only}
        p = 0.15 if only is None else 1.0
        a, k = self.pick(s.arrays), self.pick(s.ints)
        if "print" in f and self.chance(p) and self.shown.add("print") is None:
            kind = self.rng.randint(0, 4)
            if kind <= 1:
                self.emit(indent, f'print("p{self.new("")}", {self.py_int(s)})')
            elif kind == 2:
                self.emit(indent, f'print("v", {self.py_int(s)}, {self.py_int(s)}, sep="{self.pick([",", "", " | "])}")')
            elif kind == 3:
                end = self.pick([";", "\\n"])
                self.emit(indent, f'print("a", {self.arr(s)}, end="{end}")')
            else:
                self.emit(indent, f'print(f"q{{{self.py_int(s)}}}-{{{self.py_int(s)}}}")')
        if "globals" in f and self.chance(p) and self.shown.add("globals") is None:
            self.emit(indent, self.pick([
                f"{a} = clip({a} + G)", f'{k} = ({k} + CFG["k"]) % {INT_MOD}', f"{a} = clip({a} * _get())",
                f"if G > 2:\n    {a} = clip({a} - 1)", f"for _ in range(G):\n    {a} = clip({a} + 0.5)",
                f'if CFG["k"] % 2 == 0:\n    {k} = ({k} + _get()) % {INT_MOD}',
                # a class attribute read through the argument object, set between calls
                f"{k} = ({k} + obj.rate) % {INT_MOD}", f"{a} = clip({a} * obj.rate)"]))
        if "code" in f and self.chance(p) and self.shown.add("code") is None:
            self.emit(indent, self.pick([  # a global function and a method rebound between calls
                f"{a} = clip(_scale({a}))", f"{k} = _scale({k}) % {INT_MOD}", f"{a} = clip(obj.scaled({a}))",
                f"if {self.cond(s)}:\n    {a} = clip(_scale({a}) + 1)"]))
        if "counter" in f and self.chance(p) and self.shown.add("counter") is None:
            self.emit(indent, self.pick([
                "COUNTER += 1", f"COUNTER = (COUNTER + {self.py_int(s)}) % {INT_MOD}", f"HIST.append({self.py_int(s)})",
                f"{a} = clip({a} + COUNTER)", f"{k} = ({k} + len(HIST)) % {INT_MOD}", f"{a} = clip({a} + sum(HIST))",
                f"if COUNTER > 1:\n    {a} = clip({a} * 2)"]))
        if "scalar" in f and self.chance(p) and self.shown.add("scalar") is None:
            self.emit(indent, self.pick([
                f"{k} = ({k} + s) % {INT_MOD}", f"{a} = clip({a} * s)", f"{a} = clip({a} + s / 2)",
                f"if isinstance(s, bool):\n    {a} = clip({a} - 1)", f"if type(s) is float:\n    {a} = clip({a} * 0.5)",
                "log.append(s * 2)", f"if s:\n    {k} = ({k} + 1) % {INT_MOD}"]))
        if "finally" in f and self.chance(p) and self.shown.add("finally") is None:
            self.finally_statement(s, indent)
        if "return_arg" in f and self.chance(p) and self.shown.add("return_arg") is None:
            options = [f"xs[{self.pick(['0', '-1'])}] = clip({self.arr_expr(s)})",
                       f"obj.cache.append(clip({self.arr_expr(s)}))"]
            if "xs" not in s.frozen:
                options += [f"xs.insert(0, clip({self.arr_expr(s)}))", f"xs.extend([clip({self.arr(s)})])",
                            "if len(xs) > 1:\n    del xs[0]", "xs[:] = xs[::-1]", "xs.reverse()"]
            self.emit(indent, self.pick(options))
        if "alias" in f and self.chance(p) and self.shown.add("alias") is None:
            self.emit(indent, self.pick([f"T.append(clip({self.arr_expr(s)}))", f"T.append({k})",
                                         f"T[0] = {self.py_int(s)}", "T.append(T[0])"]))

    # -- effects at the call boundary (the `effects-<seed>` stream) -------------------------------
    def enew(self, root: str) -> str:
        """A name for the effects stream (`e` + root + its own counter)."""
        self.efresh += 1
        return f"e{root}{self.efresh}"

    def draw_effects(self) -> None:
        """Whether this program draws the effects stream (about one in three), and which of its
        classes (`EFFECT_FEATURES`, each about one in two of those; at least one)."""
        e = self.effects
        if e.random() >= EFFECTS_P:
            return
        chosen = [name for name in EFFECT_FEATURES if e.random() < 0.5]
        self.effect_features = frozenset(chosen or [e.choice(EFFECT_FEATURES)])
        self.iter_kind = e.choice(["floats", "arrays", "count"])
        self.local_buf = e.random() < 0.35
        self.scale_change = e.choice([("2", "0.5 if Stats.scale == 2 else 2"), ("2", "Stats.scale + 1"),
                                      ("3", "Stats.scale * 2 % 7")])
        if "ordered" in self.effect_features:
            self.returned += e.sample(["eod", "ecn", "[eod, ecn]", "[ecn, [eod]]", "{'o': eod, 'c': ecn}"],
                                      e.randint(1, 2))
        if "printfile" in self.effect_features and self.local_buf:
            self.returned.append("ebuf.getvalue()")

    def effects_prologue(self) -> str:
        """Lines after f's fixed first block (and the boundary's) that the effects stream needs."""
        lines = []
        if "ordered" in self.effect_features:
            e = self.effects
            lines.append("eod = collections.OrderedDict(" + e.choice(
                ['[("z", clip(y * 2)), ("a", k0)]', "z=x, b=1", '[("z", k1), ("q", clip(x - y))]']) + ")")
            lines.append("ecn = collections.Counter(" + e.choice(
                ['"abca"', '{"a": 2, "b": k1}', "[3, 1, 3]", '["b", "a", "b"]']) + ")")
        if "printfile" in self.effect_features and self.local_buf:
            lines.append("ebuf = io.StringIO()")
        return "\n".join(lines)

    def effects_header(self) -> str:
        """The effects stream's module-level code: `ROUND` (a global `_change()` bumps, so that a
        raise whose test reads it happens on some calls only), a list context managers append
        to, a class attribute counter and one of a base class, a module-level iterator, a file
        `_change()` replaces; `_change()` (wrapping the boundary's) and `_GLOBALS`."""
        e, f = self.effects, self.effect_features
        lines = ["", "import collections", "import contextlib", "import io", "import itertools", "",
                 "ROUND = 0", "EVENTS = []"]
        if "printfile" in f:
            lines.append("BUF = io.StringIO()")
        if "iter" in f:
            count = 3 * max(self.next_calls, 1) + e.choice([0, 1, 2, 2, 3, -1])
            if self.iter_kind == "count":
                lines.append(f"IT = itertools.count({e.randint(0, 5)}{e.choice(['', ', 2', ', -1'])})")
            elif self.iter_kind == "floats":
                items = [e.choice(["0.5", "1.0", "-1.0", "2.5", "3.0", "-0.5", "4.0"]) for _ in range(max(count, 1))]
                lines.append(f"IT = iter([{', '.join(items)}])")
            else:
                items = [f"jnp.array([{', '.join(str(e.randint(-3, 4)) + '.0' for _ in range(3))}])"
                         for _ in range(max(count, 1))]
                lines.append("IT = iter([" + ",\n            ".join(items) + "])")
        lines += ["", "", "class Bad(ValueError):", '    """An error class of the user\'s."""', "", "",
                  "class Span:", "    def __init__(self, tag):", "        self.tag = tag", "",
                  "    def __enter__(self):", "        EVENTS.append(self.tag)", "        return self", "",
                  "    def __exit__(self, *exc_info):", "        EVENTS.append(-self.tag)", "        return False",
                  "", "", "@contextlib.contextmanager", "def span(tag):", "    EVENTS.append(tag * 10)"]
        lines += (["    try:", "        yield tag", "    finally:", "        EVENTS.append(-tag * 10)"]
                  if e.random() < 0.5 else ["    yield tag", "    EVENTS.append(-tag * 10)"])
        start, change = self.scale_change
        lines += ["", "", "class Stats:", "    calls = 0", f"    scale = {start}", "", "    @classmethod",
                  "    def hit(cls):", "        cls.calls += 1", "        return cls.calls", "", "",
                  "class Scaled(Stats):", "    def apply(self, v):",
                  f"        if v.sum() > {e.randint(-2, 3)}:", "            v = v * self.scale",
                  "        return clip(v + self.calls)", ""]
        globals_ = ["ROUND", "EVENTS", "Stats.calls", "Stats.scale"] + (["BUF"] if "printfile" in f else [])
        if "globals" in self.features:  # the boundary's, which the new one calls first
            lines += ["", "_change_before = _change"]
        lines += ["", "", "def _change():", "    global ROUND" + (", BUF" if "printfile" in f else "")]
        if "globals" in self.features:
            lines.append("    _change_before()")
        lines += ["    ROUND = ROUND + 1", f"    Stats.scale = {change}"]
        if "printfile" in f:
            lines.append("    BUF = io.StringIO()  # the runner's file for the next call")
        names = ", ".join(f'"{name}"' for name in globals_)
        lines += ["", "", f"_GLOBALS = _GLOBALS + ({names})" if self.features else f"_GLOBALS = ({names})", ""]
        return "\n".join(lines) + "\n"

    def effects_statement(self, s: _Scope, indent: int, only: str | None = None) -> None:
        """Sometimes a statement of an effects class this program draws (`self.rng` is the
        effects stream here); with `only`, one statement of that class. Context managers,
        class attributes, the iterator and the OrderedDict/Counter are used at f's top level
        only (Python decides whether they run); raises, prints and big ints anywhere."""
        f = self.effect_features if only is None else {only}
        p = 0.12 if only is None else 1.0
        top = indent == 1
        if "raise" in f and self.chance(p):
            self.effect_shown.add("raise")
            self.traced_raise(s, indent)
        if "ctx" in f and top and self.chance(p * 1.5):
            self.effect_shown.add("ctx")
            self.context_managers(s, indent)
        if "classattr" in f and top and self.chance(p * 1.5):
            self.effect_shown.add("classattr")
            a, k = self.pick(s.arrays), self.pick(s.ints)
            v = self.enew("s")
            self.emit(indent, self.pick([
                f"{k} = ({k} + Stats.hit()) % {INT_MOD}", f"{a} = Scaled().apply({self.arr_expr(s)})",
                f"{a} = clip({a} + Scaled().scale)",
                f"{v} = Scaled()\n{a} = clip({a} * {v}.scale + {v}.calls)\n{k} = ({k} + type({v}).hit()) % {INT_MOD}",
                f"if Stats.calls > {self.rng.randint(0, 2)}:\n    {a} = clip({a} + Stats.scale)\nStats.hit()"]))
        if "iter" in f and top and self.chance(p * 1.5):
            self.effect_shown.add("iter")
            a, k = self.pick(s.arrays), self.pick(s.ints)
            self.next_calls += 1
            if self.iter_kind == "count":
                self.emit(indent, self.pick([f"{k} = ({k} + next(IT)) % {INT_MOD}", f"{a} = clip({a} + next(IT))",
                                             "log.append(next(IT))"]))
            else:
                default = "1.0" if self.iter_kind == "floats" else "x"
                self.emit(indent, self.pick([f"{a} = clip({a} + next(IT))", f"{a} = clip({a} * next(IT, {default}))",
                                             "log.append(next(IT))"]))
        if "ordered" in f and top and self.chance(p * 1.5):
            self.effect_shown.add("ordered")
            a, k = self.pick(s.arrays), self.pick(s.ints)
            self.emit(indent, self.pick([
                f'eod["m"] = clip({self.arr_expr(s)})', 'eod.move_to_end("z")', f'eod["n"] = {k}',
                f'{a} = clip({a} + list(eod.values())[-1])', 'ecn["a"] += 1', 'ecn.update(["b", "c", "b"])',
                f'{a} = clip({a} + ecn["a"] - ecn["zz"])', f'ecn["s"] = {self.arr(s)}.sum()',
                f'eod.setdefault("z", {a})\neod.move_to_end("z", last=False)']))
        if "printfile" in f and self.chance(p):
            self.effect_shown.add("printfile")
            target = "ebuf" if self.local_buf and self.chance(0.6) else "BUF"
            self.emit(indent, self.pick([
                f'print("e{self.enew("")}", {self.py_int(s)}, {self.arr(s)}.sum(), file={target})',
                f'print({self.arr(s)}, file={target}, end=";")',
                f'print("f", {self.py_int(s)}, {self.py_int(s)}, sep="|", file={target})',
                f'print(f"g{{{self.py_int(s)}}}", {self.arr(s)}.max(), file={target})']))
        if "bigint" in f and self.chance(p):
            self.effect_shown.add("bigint")
            self.big_int(s, indent)
        if "while_true" in f and top and self.chance(p if only else p * 0.5):
            self.effect_shown.add("while_true")
            self.searching_def(s, indent)

    def threshold(self, expr: str) -> str:
        """A placeholder for a constant that `draw_program` fills in once x and y are drawn, so
        that `expr + ROUND * 2 > constant` holds from call r on (r = 0, 1, 2; 3: never)."""
        token = f"__THRESHOLD{len(self.thresholds)}__"
        self.thresholds.append((token, expr, self.pick([0, 1, 1, 2, 2, 3])))
        return token

    def traced_raise(self, s: _Scope, indent: int) -> None:
        """A `raise` in a branch on array data (staged), its message or arguments made from
        traced values, taken on some calls only (the test reads `ROUND`, which `_change()`
        bumps); or on a program array, taken or not as the data says."""
        expr = self.pick(sorted(THRESHOLD_EXPRS))
        a = self.arr(s)
        if self.chance(0.75):
            test = f"{expr} + ROUND * 2 > {self.threshold(expr)}"
        else:
            test = f"{a}.{self.pick(['sum', 'max', 'min'])}() > {self.rng.randint(-2, 8)}"
        lines = []
        kind = self.rng.randint(0, 5)
        if kind == 0:
            error = f'{self.pick(["ValueError", "Bad", "IndexError"])}(f"bad {{{a}.sum()}} at {{{expr}}}")'
        elif kind == 1:
            error = f'{self.pick(["ValueError", "KeyError", "Bad"])}("bad", {self.pick(THRESHOLD_EXPRS)})'
        elif kind == 2:
            error = f'Bad("over", {expr}, ({self.pick(["x[0]", "y[1]", "x.min()"])}, "first"))'
        elif kind == 3:
            error = f'{self.pick(["ValueError", "KeyError"])}("bad %s" % {a}.{self.pick(["min", "max"])}())'
        elif kind == 4:
            error = f'ValueError("at %s and %s" % ({expr}, ROUND))'
        else:  # a Python counter a staged loop carried
            c = self.enew("c")
            arr = self.arr(s)
            lines.append(f"{c} = 0\nwhile {c} < {self.pick(['3', '4', 'n'])} and {arr}.sum() > {c} * {self.pick(['1', '2', '3'])}:\n"
                         f"    {c} += 1")
            error = f'{self.pick(["ValueError", "Bad"])}(f"over after {{{c}}} steps")'
        if self.chance(0.7):
            lines.append(f"if {test}:\n    raise {error}")
        else:
            b = self.pick(s.arrays)
            lines.append(f"if not ({test}):\n    {b} = clip({b} + 1)\nelse:\n    raise {error}")
        self.emit(indent, "\n".join(lines))

    def context_managers(self, s: _Scope, indent: int) -> None:
        """`with` statements whose `__enter__`/`__exit__` (a class's, a `contextmanager`
        generator's) append to the module's `EVENTS`, at f's top level and in branches and
        loops Python decides."""
        a, k = self.pick(s.arrays), self.pick(s.ints)
        sp, tg = self.enew("sp"), self.enew("tg")
        tag = self.rng.randint(1, 9)
        body = self.pick([f"{a} = clip({self.arr_expr(s)} + {sp}.tag)", f"{a} = clip({a} * 2 - {sp}.tag)",
                          f"if {self.cond(s)}:\n    {a} = clip({a} + {sp}.tag)"])
        gen_body = self.pick([f"{k} = ({k} + {tg}) % {INT_MOD}", f"{a} = clip({a} - {tg})",
                              f"if {self.cond(s)}:\n    {a} = clip({a} * {tg})\nelse:\n    {a} = clip({a} + 1)"])
        indented = lambda text, n=1: text.replace("\n", "\n" + "    " * n)  # noqa: E731
        kind = self.rng.randint(0, 8)
        if kind == 0:
            self.emit(indent, f"with Span({tag}) as {sp}:\n    {indented(body)}")
        elif kind == 1:
            self.emit(indent, f"with span({tag}) as {tg}:\n    {indented(gen_body)}")
        elif kind == 2:
            self.emit(indent, f"with Span({tag}) as {sp}, span({tag + 1}) as {tg}:\n    {indented(body)}\n"
                              f"    {indented(gen_body)}")
        elif kind == 3:
            self.emit(indent, f"if len(EVENTS) {self.pick(['<', '>', '>='])} {self.rng.randint(1, 8)}:\n"
                              f"    with Span({tag}) as {sp}:\n        {indented(body, 2)}\n"
                              f"else:\n    with span({tag}) as {tg}:\n        {indented(gen_body, 2)}")
        elif kind == 4:
            self.emit(indent, f"for {tg} in ({tag}, {tag + 1}):\n    with Span({tg}) as {sp}:\n        {indented(body, 2)}")
        elif kind == 5:
            self.emit(indent, f"while len(EVENTS) < {self.rng.randint(2, 9)}:\n    with Span({tag}) as {sp}:\n"
                              f"        {indented(body, 2)}")
        elif kind == 6:
            self.emit(indent, f"if ROUND % 2 == {self.rng.randint(0, 1)}:\n    with span({tag}) as {tg}:\n"
                              f"        {indented(gen_body, 2)}")
        elif kind == 7:  # a static trip count, which dy2st may stage as a scan
            self.emit(indent, f"for {tg} in range(2):\n    with Span({self.pick([str(tag), tg + ' + 1'])}) as {sp}:\n"
                              f"        {indented(body, 2)}")
        else:
            self.emit(indent, f"{sp} = Span({tag})\nwith {sp}:\n    {a} = clip({a} + len(EVENTS))\nwith {sp}:\n"
                              f"    {indented(gen_body.replace(tg, str(tag)))}")

    def big_int(self, s: _Scope, indent: int) -> None:
        """A Python int grown by a large constant (`k = k + 2 ** 29`) in a loop whose trip count
        may be traced (at most 3 trips: int32 holds it), and `pow(k, e, m)` of an int the data
        decides."""
        b, k = self.enew("b"), self.pick(s.ints)
        self.emit(indent, f"{b} = {self.rng.randint(0, 96)}")
        if self.chance(0.5):
            self.emit(indent, f"for {self.enew('i')} in range({self.pick(['n', 'n', '3'])}):")
        else:
            w = self.enew("w")
            self.emit(indent, f"{w} = 0\nwhile {w} < 3 and {self.arr(s)}.sum() > {self.rng.randint(-3, 4)} - {w}:")
            self.emit(indent + 1, f"{w} += 1")
        self.emit(indent + 1, f"{b} = {b} + 2 ** 29")
        p = self.enew("p")
        decided = self.pick([f"{self.rng.randint(2, 6)} if {self.arr(s)}.sum() > {self.rng.randint(-2, 4)} else {self.rng.randint(2, 9)}",
                             f"{b} % {INT_MOD}", b])
        self.emit(indent, f"{p} = {decided}")
        self.emit(indent, self.pick([f"{k} = ({b} % {INT_MOD} + pow({p}, {self.rng.randint(2, 3)}, {self.pick(['7', '11', '13'])})) % {INT_MOD}",
                                     f"{k} = pow({p}, {self.rng.randint(1, 3)}, {self.pick(['5', '97'])})",
                                     f"log.append({b} % {INT_MOD})"]))

    def searching_def(self, s: _Scope, indent: int) -> None:
        """A nested function whose `while True:` loop leaves only by `return` (one on array data,
        one after at most 4 trips)."""
        h, j = self.enew("search"), self.enew("j")
        self.emit(indent, f"def {h}(v):\n    {j} = 0\n    while True:\n        {j} += 1\n"
                          f"        v = clip(v {self.pick(['+ 1', '* 2 - 1', '- 0.5'])})\n"
                          f"        if v.{self.pick(['sum', 'max', 'min'])}() > {self.rng.randint(-2, 8)}:\n"
                          f"            return v\n        if {j} >= {self.rng.randint(1, 4)}:\n"
                          f"            return clip(v - {j})")
        a = self.pick(s.arrays)
        self.emit(indent, f"{a} = {h}({self.arr_expr(s)})")

    def while_true_ending(self, s: _Scope) -> None:
        """f's end as a `while True:` loop leaving only by `return` (one decided by array data,
        one after at most 4 trips)."""
        j, a = self.enew("j"), self.pick(s.arrays)
        self.emit(1, f"{j} = 0\nwhile True:\n    {j} += 1\n    {a} = clip({a} + {self.pick(['1', 'y', self.arr(s)])})")
        if self.chance(0.4):
            k = self.pick(s.ints)
            self.emit(2, f"{k} = ({k} + {j}) % {INT_MOD}")
        inner = s.child(int_reads=s.int_reads + [j], loop_depth=1)
        ret = self.return_text().replace("\n", "\n    ")
        self.emit(2, f"if {self.traced_test(inner, j)}:\n    {ret}\nif {j} >= {self.rng.randint(1, 4)}:\n    {ret}")

    def finally_statement(self, s: _Scope, indent: int) -> None:
        """An exception a `finally` discards by `break`/`continue`/`return`, or one
        `contextlib.suppress` swallows."""
        a, k = self.pick(s.arrays), self.pick(s.ints)
        error = self.pick(['ValueError("v")', 'KeyError("k")', "IndexError(3)"])
        kind = self.rng.randint(0, 4)
        if kind == 0 and s.loop_depth > 0:  # in the loop around it
            jump = self.pick(["break", "continue"])
            guard = f"if {self.cond(s)}:\n        {jump}" if self.chance(0.5) else jump
            self.emit(indent, f"try:\n    if {self.cond(s)}:\n        raise {error}\n    {a} = clip({a} + 1)\n"
                              f"finally:\n    log.append(5)\n    {guard}")
        elif kind <= 1:  # in a loop made here
            i = self.new("i")
            inner = s.child(int_reads=s.int_reads + [i], loop_depth=s.loop_depth + 1)
            jump = self.pick(["break", "continue"])
            guard = f"if {self.cond(inner)}:\n            {jump}" if self.chance(0.6) else jump
            self.emit(indent, f"for {i} in range({self.pick(['2', '3', 'n'])}):\n    try:\n"
                              f"        {a} = clip({a} + {self.arr(s)})\n        if {self.cond(inner)}:\n"
                              f"            raise {error}\n    finally:\n        {guard}")
        elif kind == 2 and not s.in_function:  # a return that discards the exception
            body = self.return_text("[fn(a0) for fn in FN]").replace("\n", "\n        ")
            self.emit(indent, f"try:\n    if {self.cond(s)}:\n        raise {error}\n    {k} = ({k} + 1) % {INT_MOD}\n"
                              f"finally:\n    if {self.cond(s)}:\n        {body}")
        else:
            index = self.pick(["-1", "3", "0"])
            self.emit(indent, f"with contextlib.suppress(ValueError, IndexError, KeyError):\n"
                              f"    {a} = clip({a} + L[{index}])\n    if {self.cond(s)}:\n        raise {error}\n"
                              f"    {k} = ({k} + 2) % {INT_MOD}")

    # -- calls and their boundary (the `calls-<seed>` stream) ---------------------------------------
    def fnew(self, root: str) -> str:
        """A name for the flags stream (`z` + root + its own counter)."""
        self.ffresh += 1
        return f"z{root}{self.ffresh}"

    def flags_statement(self, s: _Scope, indent: int) -> None:
        """Python values the data decides, used as Python uses them (see the module docstring)."""
        a, k = self.pick(s.arrays), self.pick(s.ints)
        shape = self.rng.randint(0, 2 if indent == 1 else 1)
        if shape == 0:
            zg = self.fnew("g")
            test = self.pick([f"{zg} is True", f"{zg} is not False", f"True is {zg}", f"{zg} is False"])
            self.emit(indent, f"{zg} = False\nif {self.cond(s)}:\n    {zg} = True\nif {test}:\n    {a} = clip({a} + 1)\n"
                              f"{k} = ({k} + int({zg}) + int({zg}) * 2) % {INT_MOD}")
        elif shape == 1:
            zg = self.fnew("v")
            self.emit(indent, f"{zg} = 0.5\nif {self.cond(s)}:\n    {zg} = {self.pick(['1.25', '0.1', '-2.0'])}\n"
                              f"print('zr', repr({zg}), f'{{{zg}!r}}')")
        else:
            self.emit(indent, f"try:\n    if {self.cond(s)}:\n        raise ValueError('zfail')\n    {a} = clip({a} * 2)\n"
                              f"finally:\n    print('zfin', {self.arr(s)}.sum())")

    def libs_statement(self, s: _Scope, indent: int) -> None:
        """A list made here, changed through a library call on each side of an `if` on array
        data, then read (see the module docstring)."""
        self.libs_drawn = True
        zl, k = self.fnew("h"), self.pick(s.ints)
        first, second = self.rng.sample([f"heapq.heappush({zl}, {self.rng.randint(0, 9)})",
                                         f"bisect.insort({zl}, {self.rng.randint(0, 9)})",
                                         f"operator.iadd({zl}, [{self.rng.randint(0, 9)}])",
                                         f"getattr({zl}, 'append')({self.rng.randint(0, 9)})"], 2)
        self.emit(indent, f"{zl} = [{self.rng.randint(0, 4)}, 5]\nif {self.cond(s)}:\n    {first}\nelse:\n    {second}\n"
                          f"{k} = ({k} + len({zl}) + {zl}[0]) % {INT_MOD}")

    # -- raises, jumps, lazy operands and outside attributes (the `lazy-<seed>` stream) ------------
    def lnew(self, root: str) -> str:
        """A name for the lazy stream (`lz` + root + its own counter)."""
        self.lfresh += 1
        return f"lz{root}{self.lfresh}"

    def lazy_test(self, s: _Scope, counter: str | None = None) -> str:
        """A test on array data (staged), maybe reading a loop counter."""
        arr, c = self.arr(s), self.rng.randint(-2, 5)
        options = [f"{arr}.sum() > {c}", f"({arr} > {c}).any()", f"{arr}[{self.rng.randint(-3, 2)}] > {c}",
                   f"{arr}.{self.pick(['max', 'min'])}() > {c}"]
        if counter:
            options += [f"({arr} * {counter}).sum() > {c}", f"{arr}[{counter} % 3] > {c}"]
        return self.pick(options)

    def lazy_statement(self, s: _Scope, indent: int) -> None:
        """One statement of the lazy stream (see the module docstring); `self.rng` is the stream."""
        kind = self.pick(LAZY_KINDS)
        {"caught": self.caught_raise, "finally_continue": self.finally_continue,
         "lazy_operand": self.lazy_operand, "defaultdict": self.default_dict,
         "outside_attrs": self.outside_attrs, "counted_break": self.counted_break}[kind](s, indent)

    def caught_raise(self, s: _Scope, indent: int) -> None:
        """An `if` on array data assigning a local array and a Python int, then a `raise
        ValueError` (always, or on a Python test) caught by `except ValueError` or suppressed by
        `_Sup` (whose `__exit__` returns True); the locals used after."""
        a, k = self.pick(s.arrays), self.pick(s.ints)
        zv, zk = self.lnew("v"), self.lnew("k")
        body = []
        if self.chance(0.5):  # set before, changed on one side
            self.emit(indent, f"{zv} = {self.arr(s)}\n{zk} = {self.rng.randint(0, 3)}")
            body.append(f"if {self.lazy_test(s)}:\n    {zv} = clip({self.arr(s)} * {self.pick(['2', '-1', '3'])})\n"
                        f"    {zk} = {self.rng.randint(4, 9)}")
        else:  # set on both sides
            body.append(f"if {self.lazy_test(s)}:\n    {zv} = clip({self.arr(s)} + {self.rng.randint(1, 3)})\n"
                        f"    {zk} = {self.rng.randint(4, 9)}\nelse:\n    {zv} = clip({self.arr(s)} - 1)\n"
                        f"    {zk} = {self.rng.randint(0, 3)}")
        if self.chance(0.3):
            body.append(f"{k} = ({k} + {zk}) % {INT_MOD}")
        message = self.pick(['"lz"', f'f"lz {{{zk}}}"', '"lz", 1'])
        if self.chance(0.5):
            body.append(f"raise ValueError({message})")
        else:
            test = self.pick([f"len(L) > {self.rng.randint(0, 3)}", f"len(P) >= {self.rng.randint(2, 4)}",
                              f"len(xs) > {self.rng.randint(0, 2)}", f"len(log) < {self.rng.randint(0, 3)}"])
            body.append(f"if {test}:\n    raise ValueError({message})")
            body.append(f"{zv} = clip({zv} * 2)")  # run where Python decides not to raise
        block = "\n".join("    " + line.replace("\n", "\n    ") for line in body)
        if self.chance(0.5):
            handler = self.pick(["pass", f"{k} = ({k} + 1) % {INT_MOD}", f"{a} = clip({a} - 1)"])
            self.emit(indent, f"try:\n{block}\nexcept ValueError:\n    {handler}")
        else:
            self.lazy_needs.add("sup")
            self.emit(indent, f"with _Sup():\n{block}")
        self.emit(indent, f"{a} = clip({a} + {zv})\n{k} = ({k} + {zk}) % {INT_MOD}")

    def finally_continue(self, s: _Scope, indent: int) -> None:
        """A `for` over `range(k)` whose `try` breaks (on the counter or array data) and whose
        `finally: continue` discards the break; Python values or arrays appended to a local list
        (before the break's test or after it) used after the loop."""
        a, b, k = self.pick(s.arrays), self.pick(s.arrays), self.pick(s.ints)
        zl, zi = self.lnew("l"), self.lnew("i")
        arrays = self.chance(0.4)
        bound = self.pick(["0", "1", "2", "3", "4", "n", "n"])
        inner = s.child(int_reads=s.int_reads + [zi], loop_depth=s.loop_depth + 1)
        if self.chance(0.5):
            test = self.pick([f"{zi} == {self.rng.randint(0, 3)}", f"{zi} >= {self.rng.randint(0, 3)}"])
        else:
            test = self.lazy_test(inner, zi)
        item = f"clip({self.arr(s)} * {zi})" if arrays else self.pick([zi, f"{zi} * 2", "7"])
        lines = [f"{zl}.append({item})", f"if {test}:\n    break"]
        if self.chance(0.5):
            lines.reverse()
        if self.chance(0.3):
            lines.append(f"{b} = clip({b} + 1)")
        block = "\n".join("        " + line.replace("\n", "\n        ") for line in lines)
        self.emit(indent, f"{zl} = []\nfor {zi} in range({bound}):\n    try:\n{block}\n    finally:\n        continue")
        if arrays:
            self.emit(indent, self.pick([f"{a} = clip(sum({zl}, {a}))", f"{k} = ({k} + len({zl})) % {INT_MOD}",
                                         f"if {zl}:\n    {a} = clip({a} + {zl}[-1])"]))
        else:
            self.emit(indent, self.pick([f"{k} = ({k} + len({zl}) + sum({zl})) % {INT_MOD}",
                                         f"{a} = clip({a} + len({zl}))", f"{k} = ({k} + len({zl})) % {INT_MOD}"]))

    def lazy_operand(self, s: _Scope, indent: int) -> None:
        """A lazy operand whose right side calls a module helper (`and`, `or`, a chained
        comparison, a conditional expression's sides, the items of `all`/`any` over a generator),
        with an effect on a local list or object (refused) or without one (as eagerly)."""
        a, k = self.pick(s.arrays), self.pick(s.ints)
        zl, zo = self.lnew("l"), self.lnew("o")
        effect = self.chance(0.5)
        shape = self.rng.randint(0, 4)
        arr, c = self.arr(s), self.rng.randint(-2, 5)
        use = self.pick([f"if {zo}:\n    {a} = clip({a} + 1)", f"{a} = clip(jnp.where({zo}, {a}, -{a}))"])
        after = f"{k} = ({k} + len({zl})) % {INT_MOD}"
        if shape in (0, 1):
            self.lazy_needs.add("lognote")
            call = f"_lognote({zl})" if effect else f"_peek({zl}) > 0"
            op = "and" if shape == 0 else "or"
            self.emit(indent, f"{zl} = [{self.rng.randint(0, 3)}]\n{zo} = {self.lazy_test(s)} {op} {call}\n{use}\n{after}")
        elif shape == 2:
            self.lazy_needs.add("lognote")
            call = f"_hi({zl})" if effect else f"_peek({zl}) + {self.rng.randint(2, 6)}"
            self.emit(indent, f"{zl} = []\nif {self.rng.randint(-3, 0)} < {arr}.sum() < {call}:\n"
                              f"    {a} = clip({a} * 2)\n{after}")
        elif shape == 3:
            self.lazy_needs.add("mark")
            zm = self.lnew("m")
            method = "mark" if effect else "peek"
            self.emit(indent, f"{zm} = _Mark()\n{a} = clip({zm}.{method}(1, {self.arr(s)} * 2) if {self.lazy_test(s)} "
                              f"else {zm}.{method}(2, {self.arr(s)} - 1))\n{k} = ({k} + {zm}.last) % {INT_MOD}")
        else:
            zi, j = self.lnew("i"), self.lnew("j")
            fn = self.pick(["all", "any"])
            if self.chance(0.5):
                items = f"{zi} > {c} for {zi} in {arr}"
                if effect:
                    items = f"{zl}.append({self.rng.randint(0, 9)}) or {items}"
            else:
                items = f"({arr} * {j}).sum() > {c} for {j} in range({self.pick(['3', '2', 'n'])})"
                if effect:
                    items = f"{zl}.append({j}) or {items}"
            self.emit(indent, f"{zl} = []\n{zo} = {fn}({items})\n{use}\n{after}")

    def default_dict(self, s: _Scope, indent: int) -> None:
        """A `collections.defaultdict(list)`/`(int)` made here (with keys or none), read or
        appended through a missing key, or `dd[k] += 1` on a key it had, inside an `if` on array
        data; returned (at f's level) or summed."""
        self.lazy_needs.add("collections")
        a, k = self.pick(s.arrays), self.pick(s.ints)
        zd = self.lnew("d")
        ints = self.chance(0.5)
        keyed = self.chance(0.6)
        if ints:
            start = '{"a": 1, "b": 2}' if keyed else ""
            self.emit(indent, f"{zd} = collections.defaultdict(int{', ' + start if start else ''})")
            changes = [f'{zd}["m"] += 1', f'{k} = ({k} + {zd}["m"]) % {INT_MOD}', f'{a} = clip({a} + {zd}["z"])']
            if keyed:
                changes += [f'{zd}["a"] += 1', f'{zd}["b"] += 1', f'{zd}["a"] += 1']
            total = f"sum({zd}.values())"
        else:
            start = '{"a": [1]}' if keyed else ""
            self.emit(indent, f"{zd} = collections.defaultdict(list{', ' + start if start else ''})")
            changes = [f'{zd}["m"].append({self.rng.randint(0, 9)})', f'{k} = ({k} + len({zd}["z"])) % {INT_MOD}']
            if keyed:
                changes += [f'{zd}["a"].append(2)', f'{zd}["a"] += [3]', f'{zd}["a"].append(2)']
            total = f"sum(len(v) for v in {zd}.values())"
        if keyed and self.chance(0.4):  # a key it had, changed where Python decides
            self.emit(indent, f'{zd}["a"] += {"1" if ints else "[4]"}')
        change = self.pick(changes)
        other = self.pick(changes) if self.chance(0.5) else None
        self.emit(indent, f"if {self.lazy_test(s)}:\n    {change}" + (f"\nelse:\n    {other}" if other else ""))
        if indent == 1 and self.chance(0.4):
            self.emit(indent, f"log.append({zd})")
        else:
            self.emit(indent, f"{k} = ({k} + {total} + len({zd})) % {INT_MOD}")

    def outside_attrs(self, s: _Scope, indent: int) -> None:
        """A module helper that counts its calls in its own attribute (`_counted.calls += 1`) and
        a module made at run time (`_CFG`), both changed by `_change()` between calls, used by f."""
        self.lazy_needs.add("attrs")
        a, k = self.pick(s.arrays), self.pick(s.ints)
        zi = self.lnew("i")
        self.emit(indent, self.pick([
            f"{a} = clip(_counted({a}))", f"{k} = (_counted({k}) + 1) % {INT_MOD}",
            f"{a} = clip({self.arr(s)} * _CFG.K)", f"{k} = ({k} + _CFG.K) % {INT_MOD}",
            f"{a} = clip(_counted({a}) * _CFG.K)", f"for {zi} in range(_CFG.K):\n    {a} = clip({a} + {zi})",
            f"if _CFG.K > {self.rng.randint(1, 2)}:\n    {a} = clip({a} - _counted(1))",
            f"if {self.lazy_test(s)}:\n    {a} = clip(_counted({a}))",
            f"if {self.lazy_test(s)}:\n    {a} = clip({a} * _CFG.K)\nelse:\n    {k} = ({k} + _CFG.K) % {INT_MOD}"]))

    def counted_break(self, s: _Scope, indent: int) -> None:
        """A `for` over `range(K)` (K 5 to 12) updating an array and a Python counter
        (`steps = i + 1`) and breaking on array data; both used after."""
        a, b, k = self.pick(s.arrays), self.pick(s.arrays), self.pick(s.ints)
        zs, zi = self.lnew("s"), self.lnew("i")
        arr = self.pick([a, "x", "y"])
        c = self.rng.randint(0, 30)
        update = self.pick([f"{a} = clip({a} + 1)", f"{a} = clip({a} + {self.pick(['x', 'y'])})", f"{a} = clip({a} * 2)",
                            f"{a} = clip({a} - {zi})"])
        self.emit(indent, f"{zs} = 0\nfor {zi} in range({self.rng.randint(5, 12)}):\n    {update}\n    {zs} = {zi} + 1\n"
                          f"    if ({arr} * {zi}).sum() > {c}:\n        break")
        self.emit(indent, self.pick([f"{k} = ({k} + {zs}) % {INT_MOD}", f"{b} = clip({b} + {zs})",
                                     f"{b} = clip({b} + {a} * {zs})", f"log.append({zs})"]))

    def lazy_header(self) -> str:
        """The module code the lazy statements drawn need: `_Sup`, the helpers of lazy operands,
        `collections`, and `_counted`/`_CFG` with a `_change()` (wrapping the ones before) that
        changes them and `_GLOBALS` naming them."""
        need = self.lazy_needs
        if not need:
            return ""
        lines = ["", ""]
        if "collections" in need:
            lines += ["import collections", "", ""]
        if "sup" in need:
            lines += ["class _Sup:", "    def __enter__(self):", "        return self", "",
                      "    def __exit__(self, *exc):", "        return True", "", ""]
        if "lognote" in need:
            lines += ["def _lognote(lst):", "    lst.append(len(lst))", "    return True", "", "",
                      "def _hi(lst):", "    lst.append(1)", "    return 5 + len(lst)", "", "",
                      "def _peek(lst):", "    return len(lst) + 1", "", ""]
        if "mark" in need:
            lines += ["class _Mark:", "    def __init__(self):", "        self.last = 0", "",
                      "    def mark(self, tag, v):", "        self.last = tag", "        return v", "",
                      "    def peek(self, tag, v):", "        return v", "", ""]
        if "attrs" in need:
            lines += ["import types", "", "_CFG = types.ModuleType(\"cfg\")", "_CFG.K = 2", "", "",
                      "def _counted(v):", "    _counted.calls += 1", "    return v + _counted.calls", "", "",
                      "_counted.calls = 0", '_change_lazy = globals().get("_change")', "", "",
                      "def _change():", "    if _change_lazy is not None:", "        _change_lazy()",
                      "    _CFG.K = _CFG.K % 3 + 1", "    _counted.calls = _counted.calls * 2 % 5", "", "",
                      '_GLOBALS = globals().get("_GLOBALS", ()) + ("_CFG.K", "_counted.calls")', ""]
        return "\n".join(lines) + "\n"

    # -- code shaped like model training (the `models-<seed>` stream) -----------------------------
    def mnew(self, root: str) -> str:
        """A name for the models stream (`mz` + root + its own counter)."""
        self.mfresh += 1
        return f"mz{root}{self.mfresh}"

    def models_statement(self, s: _Scope, indent: int, only: str | None = None) -> None:
        """One statement of the models stream (see the module docstring); `self.rng` is the stream."""
        kind = only or self.pick(MODELS_FIRST_KINDS)
        {"grad_clip": self.grad_clip, "item_attrs": self.item_attrs, "weak_repr": self.weak_repr,
         "kept_closure": self.kept_closure, "attr_global": self.attr_global, "unbound": self.unbound,
         "list_both_sides": self.list_both_sides, "new_function": self.new_function,
         "print_repr": self.print_repr, "redirect": self.redirect, "implicit_code": self.implicit_code,
         "passed_function": self.passed_function, "static_config": self.static_config,
         "bound_method": self.bound_method, "tuple_object": self.tuple_object,
         "ternary_own_list": self.ternary_own_list, "loop_else_return": self.loop_else_return,
         "counter_while": self.counter_while, "math_float": self.math_float,
         "keyword_only": self.keyword_only}[kind](s, indent)

    def grad_clip(self, s: _Scope, indent: int) -> None:
        """`g = jax.grad(_mloss)(params, v)` over nested dict params made here, its global norm, an
        `if` on it rebinding `g` to a `tree_map` of it (or setting a scale: the effect-free twin),
        the params updated and `g` used after; maybe in a loop over `range(n)`, or in a module
        helper beside a Python float (`_mclip_step(p, v, 0.1)`). Or its refused twin: a nested
        dict another local holds before an `if` that rebinds that local."""
        a, b, k = self.pick(s.arrays), self.pick(s.arrays), self.pick(s.ints)
        shape = self.rng.randint(0, 4)
        if shape == 4:
            zc, zh = self.mnew("c"), self.mnew("h")
            self.emit(indent, f'{zc} = {{"a": {{"v": clip({self.arr(s)})}}}}\n{zh} = {zc}\n'
                              f'if {self.lazy_test(s)}:\n    {zh} = {{"a": {{"v": clip({self.arr(s)} + 1)}}}}\n'
                              f'{zh}["a"]["v"] = clip({zh}["a"]["v"] * 2)\n'
                              f'{a} = clip({a} + {zc}["a"]["v"] - {zh}["a"]["v"])')
            return
        self.models_needs.add("loss")
        zp, zg, zn = self.mnew("p"), self.mnew("g"), self.mnew("n")
        w = self.pick([f"clip({self.arr(s)} * 0.5)", "x * 0.5", f"clip({self.arr(s)} - 1)", "y"])
        bias = self.pick([f"clip({self.arr(s)} - 1)", "y - 1", "jnp.zeros(3)", "x"])
        loop = self.chance(0.25)
        # tree_map gives dicts back in sorted key order: a loop carrying params needs them so
        layers = (f'"l1": {{"b": {bias}, "w": {w}}}' if loop or self.chance(0.3) else f'"l1": {{"w": {w}, "b": {bias}}}')
        if self.chance(0.3):
            layers += f', "l2": {{"w": {self.pick(["y * 0.25", "x - 2", f"clip({self.arr(s)} * 0.25)"])}}}'
        self.emit(indent, f"{zp} = {{{layers}}}")
        v = self.pick(["x", "y", f"clip({self.arr(s)} * 0.5)"])
        c = self.pick(["1.0", "5.0", "50.0", "1000.0", "2"])
        lr = self.pick(["0.1", "0.5", "0.25"])
        body = []
        if shape == 3:  # a module helper beside a Python float (and maybe its default `c`)
            self.models_needs.add("clip_step")
            body.append(f"{zp} = _mclip_step({zp}, {v}, {lr}{', ' + c if self.chance(0.6) else ''})")
        else:
            norm = self.pick([f"jnp.sqrt(sum(jnp.sum(u ** 2) for u in jax.tree_util.tree_leaves({zg})))",
                              f"jnp.linalg.norm(jnp.concatenate([u.ravel() for u in jax.tree_util.tree_leaves({zg})]))"])
            body.append(f"{zg} = jax.grad(_mloss)({zp}, {v})\n{zn} = {norm}")
            if shape < 2:
                body.append(f"if {zn} > {c}:\n    {zg} = jax.tree_util.tree_map(lambda u: u * {c} / {zn}, {zg})")
            else:  # the effect-free twin: a scale set on each side, g rebound after the if
                zf = self.mnew("f")
                body.append(f"if {zn} > {c}:\n    {zf} = {c} / {zn}\nelse:\n    {zf} = 1.0\n"
                            f"{zg} = jax.tree_util.tree_map(lambda u: u * {zf}, {zg})")
            body.append(f"{zp} = jax.tree_util.tree_map(lambda p, u: clip(p - {lr} * u), {zp}, {zg})")
        if loop:
            zi = self.mnew("i")
            self.emit(indent, f"for {zi} in range({self.pick(['n', 'n', '2'])}):")
            self.emit(indent + 1, "\n".join(body))
        else:
            self.emit(indent, "\n".join(body))
        # rounded where used: a clipped gradient is not exact (eager and XLA differ in its last bits)
        uses = [f'{a} = clip({a} + jnp.round({zp}["l1"]["w"]))', f'{b} = clip({b} - jnp.round({zp}["l1"]["b"]))']
        if shape < 3 and not loop:  # g (and its norm) used after the if
            uses += [f'{a} = clip({a} + jnp.round({zg}["l1"]["b"]))', f"{k} = ({k} + ({zn} > {c})) % {INT_MOD}",
                     f'{b} = clip({b} * 0.5 + jnp.round({zg}["l1"]["w"]))']
        for text in self.rng.sample(uses, self.rng.randint(1, 2)):
            self.emit(indent, text)

    def item_attrs(self, s: _Scope, indent: int) -> None:
        """Items of a list an object's attribute holds (`_MPair(...).b` made here, or the caller's
        `obj.cache` extended here), written with constant indices in the sides of an `if` on array
        data, or in a loop whose trip count may be traced (`o.b[0] = o.b[0] + i`), maybe beside a
        method changing another item (`o.bump_second()`: refused where the loop is staged)."""
        self.models_needs.add("pair")
        a, k = self.pick(s.arrays), self.pick(s.ints)
        arrays = self.chance(0.5)
        shape = self.rng.randint(0, 3)
        first, second = (f"clip({self.arr(s)})", f"clip({self.arr(s)} + 1)") if arrays else (
            str(self.rng.randint(0, 2)), str(self.rng.randint(0, 2)))
        if indent == 1 and shape != 3 and self.chance(0.3):  # the caller's object
            t, i0, i1 = "obj.cache", "-2", "-1"
            self.emit(indent, f"obj.cache.extend([{first}, {second}])")
        else:
            zo = self.mnew("o")
            t, i0, i1 = f"{zo}.b", "0", "1"
            self.emit(indent, f"{zo} = _MPair({first}, {second})")
        if shape == 0:
            one, other = (f"clip({self.arr(s)} * 2)", f"clip({self.arr(s)} - 1)") if arrays else (
                str(self.rng.randint(1, 5)), str(-self.rng.randint(1, 3)))
            text = f"if {self.lazy_test(s)}:\n    {t}[{i0}] = {one}"
            if self.chance(0.7):
                text += f"\nelse:\n    {t}[{i1}] = {other}"
            self.emit(indent, text)
        else:
            zi = self.mnew("i")
            step = f"clip({t}[{i0}] + {zi})" if arrays else f"{t}[{i0}] + {zi}"
            lines = [f"{t}[{i0}] = {step}"]
            if shape == 3:
                lines.insert(self.rng.randint(0, 1), f"{t[:-2]}.bump_second()")
            inner = "\n".join("    " + line for line in lines)
            if self.chance(0.5):
                self.emit(indent, f"for {zi} in range({self.pick(['n', 'n', 'n + 1', '3'])}):\n{inner}")
            else:
                bound = self.pick(["n", "n", "3"])
                test = f"{zi} < {bound}" if self.chance(0.6) else f"{zi} < {bound} and {self.lazy_test(s)}"
                self.emit(indent, f"{zi} = 0\nwhile {test}:\n{inner}\n    {zi} += 1")
        if arrays:
            self.emit(indent, self.pick([f"{a} = clip({a} + {t}[{i0}] - {t}[{i1}])", f"{a} = clip({a} + {t}[{i1}])"]))
        else:
            self.emit(indent, self.pick([f"{k} = ({k} + {t}[{i0}] + {t}[{i1}]) % {INT_MOD}",
                                         f"{k} = ({k} + {t}[{i0}] * 2) % {INT_MOD}"]))
        if indent == 1 and t != "obj.cache" and self.chance(0.3):
            self.emit(indent, f"log.append({t})")

    def weak_repr(self, s: _Scope, indent: int) -> None:
        """`print(repr(v))` of weakly typed arrays (`jnp.asarray(1.0)`, a `jnp.where` of two Python
        floats on array data, one given to a module helper as its argument) and of containers
        holding them; stdout is compared with eager's."""
        zw = self.mnew("w")
        make = self.pick(["jnp.asarray(1.0)", "jnp.array(2.5)", "jnp.asarray(-0.5)",
                          f"jnp.where({self.lazy_test(s)}, 1.0, 2.0)", "jnp.asarray(1.0) * 2 + len(xs)",
                          f"jnp.where({self.lazy_test(s)}, 0.5, -1.0) * 3"])
        self.emit(indent, f"{zw} = {make}")
        arr = self.arr(s)
        prints = [f"print(repr({zw}))", f"print(repr({zw}), repr({arr}.sum()))", f"print([{zw}, {zw} * 2])",
                  f"print(repr(({zw}, {arr}[0])))", f'print({{"w": {zw}}})', f"print(repr({zw}), str({zw}))",
                  f'print(f"w={{{zw}!r}}")', f"print(repr([{zw}]), {arr})"]
        for text in self.rng.sample(prints, self.rng.randint(1, 2)):
            if self.chance(0.2):
                text = f"if {self.lazy_test(s)}:\n    {text}"
            self.emit(indent, text)
        a = self.pick(s.arrays)
        if self.chance(0.5):  # a weak array argument of a helper that prints its repr
            self.models_needs.add("show")
            self.emit(indent, f"{a} = clip({a} + _mshow({self.pick([zw, 'jnp.asarray(2.5)', 'jnp.array(1.0)'])}))")
        elif self.chance(0.5):
            self.emit(indent, f"{a} = clip({a} + {zw})")

    def kept_closure(self, s: _Scope, indent: int) -> None:
        """A lambda or `functools.partial` kept in a module list (`_MTAPE`), dict (`_MHOOKS`) or
        object's attribute (`_MTRAINER.hook`): over the call's traced values (refused, the global
        left as it was), or, at f's top level only, over Python values (as eagerly: the list grows
        on every call), then called."""
        self.models_needs.add("tape")
        a, k = self.pick(s.arrays), self.pick(s.ints)
        arr = self.arr(s)
        where = self.rng.randint(0, 2)
        if indent > 1 or self.chance(0.35):  # over traced values
            if where == 0:
                zl = self.mnew("l")
                text = self.pick([f"_MTAPE.append(lambda v: v + {arr})", f"_MTAPE.append(lambda v, w={arr}: v + w)",
                                  f"{zl} = [{arr}]\n_MTAPE.append(lambda v: v * {zl}[0])"])
            elif where == 1:
                text = self.pick([f'_MHOOKS["scale"] = functools.partial(jnp.multiply, {arr}.sum())',
                                  f'_MHOOKS["scale"] = functools.partial(_mscale, k={arr})'])
            else:
                text = f"_MTRAINER.hook = lambda v: v * {arr}"
        else:
            py = self.pick(["len(xs)", "len(P)", str(self.rng.randint(1, 3))])
            if where == 0:
                text = self.pick([f"_MTAPE.append(lambda v, k={py}: v * k)", f"_MTAPE.append(lambda v: v + {py})"])
            elif where == 1:
                text = self.pick([f'_MHOOKS["scale"] = functools.partial(_mscale, k={py})',
                                  f'_MHOOKS["scale"] = functools.partial(jnp.multiply, {self.rng.randint(1, 3)}.0)'])
            else:
                text = f"_MTRAINER.hook = lambda v: v * {py}"
        self.emit(indent, text)
        if where == 0:
            self.emit(indent, self.pick([f"{a} = clip({a} + _MTAPE[-1]({arr}))", f"{k} = ({k} + len(_MTAPE)) % {INT_MOD}",
                                         f"{a} = clip({a} + sum(fn(1) for fn in _MTAPE))"]))
        elif where == 1:
            self.emit(indent, f'{a} = clip({a} + _MHOOKS["scale"]({arr}))')
        else:
            self.emit(indent, f"{a} = clip(_MTRAINER.hook({a}))")

    def attr_global(self, s: _Scope, indent: int) -> None:
        """An attribute whose name a module global has too, the global changed between calls:
        `state.params` of a `_TState` made here (maybe through a helper) beside a global `params`,
        or `obj.h`/`obj.count`/`obj.cache` beside globals `h`, `count`, `cache`; where f also reads
        the global (the twin), its changes must be seen."""
        a, k = self.pick(s.arrays), self.pick(s.ints)
        if self.chance(0.5):
            self.models_needs.add("params")
            zs = self.mnew("s")
            self.emit(indent, f"{zs} = _TState(clip({self.arr(s)} * 0.5))")
            self.emit(indent, self.pick([f'{a} = clip({a} + {zs}.params["w"])', f"{a} = clip(_mapply({zs}, {a}))",
                                         f'{a} = clip({a} + {zs}.params["w"] - params["w"])',
                                         f'{zs}.params = {{"w": clip({zs}.params["w"] + 1)}}\n{a} = clip(_mapply({zs}, {a}))']))
        else:
            self.models_needs.add("globals")
            self.emit(indent, self.pick([f"{a} = clip({a} + obj.h)", f"{k} = ({k} + obj.count) % {INT_MOD}",
                                         f"{k} = ({k} + len(obj.cache)) % {INT_MOD}", f"{a} = clip({a} + h - obj.h)",
                                         f"{k} = ({k} + obj.count + count) % {INT_MOD}",
                                         f"{a} = clip({a} + obj.h * len(cache))"]))

    def models_header(self) -> str:
        """The module code the models statements drawn need: `_mloss` (and `_mclip_step`), `_MPair`,
        `_mshow`, the module objects closures are kept in, and the globals named like attributes
        with a `_change()` (wrapping the ones before) that changes them and `_GLOBALS` naming them."""
        need = self.models_needs
        if not need:
            return ""
        lines = ["", ""]
        names = []
        if "loss" in need:
            lines += ["def _mloss(p, v):", '    return sum(jnp.sum((v * layer["w"] + layer.get("b", 0.0)) ** 2) '
                      "for layer in p.values())", "", ""]
        if "clip_step" in need:
            lines += ["def _mclip_step(params, v, lr, c=1.0):", "    g = jax.grad(_mloss)(params, v)",
                      "    gnorm = jnp.sqrt(sum(jnp.sum(u ** 2) for u in jax.tree_util.tree_leaves(g)))",
                      "    if gnorm > c:", "        g = jax.tree_util.tree_map(lambda u: u * c / gnorm, g)",
                      "    return jax.tree_util.tree_map(lambda p, u: clip(p - lr * u), params, g)", "", ""]
        if "pair" in need:
            lines += ["class _MPair:", "    def __init__(self, first, second):", "        self.b = [first, second]", "",
                      "    def bump_second(self):", "        self.b[1] = self.b[1] + 1", "", ""]
        if "show" in need:
            lines += ["def _mshow(v):", "    print(repr(v), [v])", "    return v * 2", "", ""]
        if "tape" in need:
            lines += ["import functools", "", "_MTAPE = []", "_MHOOKS = {}", "", "",
                      "class _MTrainer:", "    def __init__(self):", "        self.hook = None", "", "", "_MTRAINER = _MTrainer()", "", "",
                      "def _mscale(v, k=2):", "    return v * k", "", ""]
            names += ["_MTAPE", "_MHOOKS", "_MTRAINER.hook"]
        change = []
        if "params" in need:
            lines += ['params = {"w": jnp.ones(3, jnp.float32)}', "", "",
                      "class _TState:", "    def __init__(self, w):", '        self.params = {"w": w}', "", "",
                      "def _mapply(state, v):", '    return state.params["w"] * v', "", ""]
            change += ['    params["w"] = params["w"] + 1']
            names += ["params"]
        if "globals" in need:
            lines += ["h = jnp.full(3, 2.0, jnp.float32)", "count = 5", "cache = [1]", "", ""]
            change += ["    global h, count", "    h = h + 1", "    count = count + 1", "    cache.append(len(cache))"]
            names += ["h", "count", "cache"]
        if change:
            declared = [line for line in change if line.startswith("    global")]
            lines += ['_change_models = globals().get("_change")', "", "", "def _change():", *declared,
                      "    if _change_models is not None:", "        _change_models()",
                      *(line for line in change if line not in declared), "", ""]
        if names:
            lines += [f'_GLOBALS = globals().get("_GLOBALS", ()) + {tuple(names)!r}', ""]
        return "\n".join(lines) + "\n"

    # -- the models stream's later classes (drawn from `models-more-<seed>`) -------------------
    def mqnew(self, root: str) -> str:
        """A name for the models stream's later classes (`mq` + root + a counter of their own)."""
        self.mqfresh += 1
        return f"mq{root}{self.mqfresh}"

    def mq_test(self, s: _Scope, python: float = 0.25) -> str:
        """A test an `if` takes: mostly on array data (staged), sometimes one Python decides."""
        if self.chance(python):
            return self.pick([f"len(xs) > {self.rng.randint(0, 2)}", f"len(P) > {self.rng.randint(2, 3)}",
                              f"len(L) == {self.rng.randint(2, 3)}"])
        return self.lazy_test(s)

    def xy_test(self) -> str:
        """A test on array data that reads only `x` and `y` (f never rebinds them), so a second
        `if` on it later takes the side the first took."""
        return self.pick([f"x.sum() > {self.rng.randint(-1, 8)}", f"y.max() > {self.rng.randint(1, 5)}",
                          f"x[{self.rng.randint(-3, 2)}] > {self.rng.randint(-1, 3)}",
                          f"(x - y).min() > {self.rng.randint(-5, 0)}"])

    def unbound(self, s: _Scope, indent: int) -> None:
        """A local that a staged `if` or a loop with a traced trip count may leave unbound, read
        after it: under the same condition, unconditionally (eager raises UnboundLocalError where
        the data left it unbound: to_static must raise one too), by `u += ...`, or read in a later
        iteration before the loop body sets it (`if ...: s = s + prev` then `prev = ...`)."""
        a, k = self.pick(s.arrays), self.pick(s.ints)
        u = self.mqnew("u")
        value = self.pick([f"clip({self.arr(s)} * 2)", f"clip({self.arr(s)} - 1)", f"{self.arr(s)}.sum()",
                           "clip(x + y)"])
        shape = self.rng.randint(0, 5)
        if shape <= 1:  # a staged if sets it on one side only
            test = self.xy_test() if self.chance(0.6) else self.lazy_test(s)
            flag = None
            if self.chance(0.3):
                flag = self.mqnew("c")
                self.emit(indent, f"{flag} = {test}")
            text = f"if {flag or test}:\n    {u} = {value}"
            if self.chance(0.3):
                text += f"\nelse:\n    {a} = clip({a} - 1)"
            self.emit(indent, text)
            if self.chance(0.3):
                self.emit(indent, f"{k} = ({k} + len(xs)) % {INT_MOD}")
            read = self.pick([f"{a} = clip({a} + {u})", f"{u} += {self.pick(['1', 'y', a])}\n{a} = clip({a} + {u})",
                              f"{a} = clip({a} * 0.5 + {u} * 2)"])
            if shape == 0 and (flag or test.startswith(("x", "y", "(x"))):  # (a): under the same condition
                self.emit(indent, f"if {flag or test}:\n" + "\n".join("    " + line for line in read.split("\n")))
            else:  # (b), (c): unconditionally (or under another test)
                if self.chance(0.2):
                    read = f"if {self.mq_test(s)}:\n" + "\n".join("    " + line for line in read.split("\n"))
                self.emit(indent, read)
            return
        if shape <= 4:  # first set in a loop whose trip count may be traced, read after it
            i = self.mqnew("i")
            if shape == 2:
                self.emit(indent, f"for {i} in range({self.pick(['n', 'n', 'n - 1', 'k0 % 3' if 'k0' in s.ints else '0'])}):")
                body = [f"{u} = clip({self.arr(s)} + {i})"]
            elif shape == 3:
                over = self.pick(["x[:len(xs) - 1]", "y[:0]", "x", "jnp.zeros((0,), jnp.float32)", "x[2:]",
                                  "x[:len(xs) - 1] * 2"])
                self.emit(indent, f"for {i} in {over}:")
                body = [f"{u} = clip({self.arr(s)} + {i})"]
            else:
                bound = self.pick(["n", "3", "2"])
                self.emit(indent, f"{i} = 0")
                arr, c = self.arr(s), self.rng.randint(-2, 6)
                self.emit(indent, self.pick([f"while {i} < {bound} and ({arr} * ({i} + 1)).sum() > {c}:",
                                             f"while x.sum() - {i} * 4 > {c} and {i} < {bound}:"]))
                body = [f"{u} = clip({self.arr(s)} * {i})", f"{i} += 1"]
            if self.chance(0.3):
                body.append(f"{a} = clip({a} + 1)")
            self.emit(indent + 1, "\n".join(body))
            read = self.pick([f"{a} = clip({a} + {u})", f"{u} += 1\n{a} = clip({a} - {u})"])
            if self.chance(0.4):
                read = f"if {self.mq_test(s, 0.5)}:\n" + "\n".join("    " + line for line in read.split("\n"))
            self.emit(indent, read)
            return
        # (shape 5) read in a later iteration before the body sets it
        i, prev = self.mqnew("i"), self.mqnew("p")
        c = self.rng.randint(-3, 4)
        self.emit(indent, f"for {i} in range({self.pick(['3', 'n', 'n + 1', '2'])}):")
        self.emit(indent + 1, f"if {self.pick(['x', 'y', self.arr(s)])}[{i} % 3] > {c}:\n    {a} = clip({a} + {prev})\n"
                              f"{prev} = {self.pick(['x', 'y'])}[{i} % 3]")

    def list_both_sides(self, s: _Scope, indent: int) -> None:
        """The caller's list (`xs`, `obj.cache`) appended to on both sides of a staged `if` (or
        `if`/`elif`/`else`; by `append`, `t += [v]`, or through an alias `t = xs; t.append(...)`),
        then its length read, more appended, maybe returned: its items from before the call stay."""
        a, k = self.pick(s.arrays), self.pick(s.ints)
        lst = "xs" if "xs" not in s.frozen and self.chance(0.7) else "obj.cache"
        if lst == "obj.cache" and self.chance(0.5):
            self.emit(indent, f"obj.cache.append(clip({self.arr(s)}))")
        name = lst
        if self.chance(0.3):
            name = self.mqnew("t")
            self.emit(indent, f"{name} = {lst}")
        arrays = self.chance(0.8) or lst == "xs"  # (f reads xs's items as arrays; obj.cache holds ints too)

        def add(how: int) -> str:
            v = f"clip({self.arr(s)} {self.pick(['+', '-', '*'])} {self.rng.randint(1, 3)})" if arrays else str(
                self.rng.randint(0, 5))
            if how == 0:
                return f"{name}.append({v})"
            if how == 1:
                return f"{name} += [{v}]" if name != "obj.cache" else f"obj.cache += [{v}]"
            alias = self.mqnew("s")
            return f"{alias} = {name}\n{alias}.append({v})"

        def side(lines: str) -> str:
            return "\n".join("    " + line for line in lines.split("\n"))

        hows = [self.rng.randint(0, 2) for _ in range(3)]
        text = f"if {self.lazy_test(s)}:\n{side(add(hows[0]))}"
        if self.chance(0.35):
            text += f"\nelif {self.lazy_test(s)}:\n{side(add(hows[1]))}"
        text += f"\nelse:\n{side(add(hows[2]))}"
        self.emit(indent, text)
        after = [f"{k} = ({k} + len({lst})) % {INT_MOD}", f"{a} = clip({a} + {lst}[-1])" if arrays else
                 f"{k} = ({k} + {lst}[-1]) % {INT_MOD}", f"{lst}.append({'clip(' + a + ')' if arrays else k})",
                 f"{a} = clip({a} + len({name}))"]
        for line in self.rng.sample(after, self.rng.randint(1, 3)):
            self.emit(indent, line)
        if indent == 1 and not s.in_function and self.chance(0.4):
            self.mq_tail.append(f"log.append({name})")  # returned (f's return line stays as it was)

    def new_function(self, s: _Scope, indent: int) -> None:
        """A nested `def` or lambda made in f, returned beside arrays (at f's top level): of no
        closure, closing over a Python int or str (a local, `n`, a module helper's argument), or
        with a mutable default (refused). The runner checks each call returns a new function
        object and that calling it gives eager's value."""
        a = self.pick(s.arrays)
        fn, part = self.mqnew("f"), ""
        shape = self.rng.randint(0, 6)
        if shape == 0:
            self.emit(indent, f"def {fn}(v):\n    return v * {self.rng.randint(2, 3)} + 1")
        elif shape == 1:
            self.emit(indent, f"{fn} = lambda v: v - {self.rng.randint(1, 4)}")
        elif shape == 2:  # a closure over a Python int local (or n: a traced one where n is an array)
            kk = self.mqnew("k")
            self.emit(indent, f"{kk} = {self.pick(['len(xs)', 'len(P) + 1', 'n', 'len(L) * 2'])}")
            if self.chance(0.5):
                self.emit(indent, f"def {fn}(v):\n    return v + {kk}")
            else:
                self.emit(indent, f"{fn} = lambda v: v * {kk}")
        elif shape == 3:  # a closure over a Python str
            tag = self.mqnew("s")
            self.emit(indent, f'{tag} = "w" * len(xs) + {self.pick(["str(len(P))", repr("b"), "str(len(L))"])}')
            part = "[0]" if self.chance(0.5) else ""  # (a closure calling len() is refused today: its cells hold a module)
            self.emit(indent, f"def {fn}(v):\n    return " + (f"(v + 1, {tag})" if part else f"v * len({tag})"))
        elif shape == 4:  # made by a module helper, closing over its Python int argument
            self.mq_needs.add("adder")
            self.emit(indent, f"{fn} = _mq_make_adder({self.pick(['len(xs)', 'len(P)', '2'])})")
        elif shape == 5:  # a mutable default: one list every call's function would share (refused)
            self.emit(indent, f"def {fn}(v, seen=[]):\n    return v + len(seen)")
        else:  # a function defined in a staged branch of an if, the same on both sides
            self.emit(indent, f"if {self.lazy_test(s)}:\n    {fn} = lambda v: v + 1\nelse:\n    {fn} = lambda v: v + 2")
        part = part if shape == 3 else ""  # a call's part that is an array
        self.emit(indent, self.pick([f"{a} = clip({a} + {fn}({self.arr(s)}){part})", f"{a} = clip({fn}({a}){part})"]))
        if indent == 1 and not s.in_function:
            self.mq_needs.add("functions")
            # returned in `log` (f's return line stays as it was); maybe twice: one object twice
            self.mq_tail.append(f"log.append({fn})" if self.chance(0.7) else f"log += [{fn}, {fn}]")

    def print_repr(self, s: _Scope, indent: int) -> None:
        """`print(repr(v))` of bool arrays, 0-d bools, arrays numpy summarises (`jnp.tile`), empty
        arrays, int8 and bfloat16 arrays (also in a staged `if`); and a dataclass object holding
        traced arrays printed, then returned."""
        arr = self.arr(s)
        values = [f"{arr} > 0", f"({arr} > {self.rng.randint(-1, 2)}).all()", f"{arr}.sum() > 0",
                  f"jnp.tile({arr}, 400)", f"{arr}[:0]", "jnp.zeros((0, 2), jnp.int32)",
                  f"{arr}.astype(jnp.int8)", f"{arr}.astype(jnp.bfloat16)", "(x > y)",
                  f"jnp.tile({arr} > 1, 500)"]
        for v in self.rng.sample(values, self.rng.randint(1, 3)):
            text = self.pick([f"print(repr({v}))", f"print(repr({v}), {self.pick(['len(xs)', repr('at')])})",
                              f'print(f"v={{{v}!r}}")', f"print([{v}])"])
            if self.chance(0.3):
                text = f"if {self.mq_test(s)}:\n    {text}"
            self.emit(indent, text)
        if self.chance(0.5):
            self.mq_needs.add("record")
            rec = self.mqnew("r")
            self.emit(indent, f'{rec} = _MQRec(clip({self.arr(s)} * 2), {self.arr(s)} > 0, "{self.pick(["w", "b"])}")')
            self.emit(indent, self.pick([f"print({rec})", f"print(repr({rec}))", f'print("rec", {rec})']))
            if indent == 1 and not s.in_function:
                self.mq_tail.append(f"log.append({rec})")
            else:
                a = self.pick(s.arrays)
                self.emit(indent, f"{a} = clip({a} + {rec}.w)")

    def redirect(self, s: _Scope, indent: int) -> None:
        """Prints inside `contextlib.redirect_stdout(_MQBUF)`, a module-level StringIO (its text,
        compared after every call, must grow on every call; in a staged `if` too), or the refused
        twin: a local StringIO printed into and read back (`buf.getvalue()`) in the call."""
        self.mq_needs.add("buf")
        a, k = self.pick(s.arrays), self.pick(s.ints)
        prints = [f"print({self.arr(s)}.sum())", f"print('k', {k}, len(xs))", f"print(repr({self.arr(s)} > 0))",
                  f"print({self.arr(s)}, sep='')", "print('step', end=' ')"]
        if self.chance(0.75):
            body = [self.pick(prints) for _ in range(self.rng.randint(1, 2))]
            if self.chance(0.3):
                body.append(f"if {self.mq_test(s)}:\n    {self.pick(prints)}")
            self.emit(indent, "with contextlib.redirect_stdout(_MQBUF):\n"
                      + "\n".join("    " + line for text in body for line in text.split("\n")))
            if self.chance(0.5):
                self.emit(indent, self.pick([f"print('out', {k})", f"{a} = clip({a} + 1)"]))
            return
        buf = self.mqnew("b")
        self.emit(indent, f"{buf} = io.StringIO()\nwith contextlib.redirect_stdout({buf}):\n"
                          f"    print({self.arr(s)}.sum(), 'x')")
        self.emit(indent, self.pick([f"{k} = ({k} + len({buf}.getvalue())) % {INT_MOD}",
                                     f"log.append({buf}.getvalue())"]))

    def models_more_header(self) -> str:
        """The module code the models stream's later classes need (written only where drawn)."""
        need = self.mq_needs
        if not need:
            return ""
        lines = ["", ""]
        if "adder" in need:
            lines += ["def _mq_make_adder(k):", "    def add(v):", "        return v + k", "", "    return add", "", ""]
        if "record" in need:
            lines += ["@dataclasses.dataclass", "class _MQRec:", "    w: jax.Array", "    pos: jax.Array", "    tag: str",
                      "", ""]
        if "functions" in need:  # the runner checks the functions f returns (a new one per call, eager's values)
            lines += ["_MQ_FUNCTIONS = True", ""]
        if "buf" in need:
            lines += ["import contextlib", "import io", "", "_MQBUF = io.StringIO()", "",
                      '_GLOBALS = globals().get("_GLOBALS", ()) + ("_MQBUF",)', ""]
        return "\n".join(lines) + "\n"

    # -- the models stream's latest classes (drawn from `models-late-<seed>`) ------------------
    def mlnew(self, root: str) -> str:
        """A name for the models stream's latest classes (`ml` + root + a counter of their own)."""
        self.mlfresh += 1
        return f"ml{root}{self.mlfresh}"

    def ml_need(self, need: str) -> None:
        self._need(self.ml_needs, need)

    def _need(self, needs: dict, need: str) -> None:
        """Note that f needs the module code `need` (of one stream's `needs`); the first time,
        draw how `_change()` changes it."""
        if need not in needs:
            needs[need] = self.rng.randint(0, 3)

    def ml_staged(self, s: _Scope, text: str, other: str | None = None) -> str:
        """`text` (one statement) as the side of an `if` on array data, with `other` as its else."""
        out = f"if {self.lazy_test(s)}:\n" + "\n".join("    " + line for line in text.split("\n"))
        if other:
            out += "\nelse:\n" + "\n".join("    " + line for line in other.split("\n"))
        return out

    def implicit_code(self, s: _Scope, indent: int) -> None:
        """Code Python calls by itself reading a global `_change()` changes between calls: a
        property (`m.scale`), `__len__`, `__bool__` (`if m:`), `__eq__` (`m == 2`), `__getattr__` of a
        missing attribute (`m.gain`), a descriptor's `__get__` (`_MLHOLDER.scale`), of a module-level
        `_MLBox` or one made in f; used in array arithmetic, a Python `if`, a loop's trip count, an
        `if` on array data; and the counting twins (`m.counted`, `m.tally` bump `_MLBox.hits`)."""
        self.ml_need("implicit")
        a, k = self.pick(s.arrays), self.pick(s.ints)
        if self.chance(0.5):
            m = "_MLBOX"
        else:
            m = self.mlnew("m")
            self.emit(indent, f"{m} = _MLBox()")
        holder = self.pick(["_MLHOLDER", "_MLHolder", "_MLHolder()"])
        values = [f"{m}.scale", f"len({m})", f"{m}.gain", f"{holder}.scale", f"({m}.scale * len({m}))"]
        for _ in range(self.rng.randint(1, 3)):
            v = self.pick([f"{m}.counted", f"{m}.tally"]) if self.chance(0.2) else self.pick(values)
            shape = self.rng.randint(0, 6)
            if shape <= 1:
                text = f"{a} = clip({a} {self.pick(['+', '-', '*'])} {v})"
            elif shape == 2:  # a Python if on what the object says
                test = self.pick([m, f"not {m}", f"{m} == 2", f"{m} != 1", f"{m}.scale > 3", f"len({m}) > 1",
                                  f"{holder}.scale > 3", f"{m}.gain < 5"])
                text = f"if {test}:\n    {a} = clip({a} + {v})\nelse:\n    {a} = clip({a} - 1)"
            elif shape == 3:  # in a side of an if on array data
                text = self.ml_staged(s, f"{a} = clip({a} + {v})", f"{a} = clip({a} - 1)" if self.chance(0.5) else None)
            elif shape == 4:  # ... or in its test
                text = (f"if ({self.arr(s)} * {v}).sum() > {self.rng.randint(-2, 6)}:\n    {a} = clip({a} - 1)\n"
                        f"else:\n    {a} = clip({a} + 2)")
            elif shape == 5:
                text = self.pick([f"{k} = ({k} + len({m}) + ({m} == 2)) % {INT_MOD}",
                                  f"{k} = ({k} + int({m}.scale)) % {INT_MOD}",
                                  f"{k} = ({k} + int({holder}.scale) * bool({m})) % {INT_MOD}"])
            else:
                i = self.mlnew("i")
                text = f"for {i} in range(len({m})):\n    {a} = clip({a} + {i} * {m}.scale)"
            self.emit(indent, text)

    def passed_function(self, s: _Scope, indent: int) -> None:
        """A module function reading a global `_change()` changes (`_ML_W`), handed to `sorted`,
        `max`/`min` (`key=`), `list.sort(key=)`, `map`, `filter`, `functools.reduce` (or a callable
        object `_MLACC`), over Python ints (`P`) or arrays (`L`, a traced key); used on arrays."""
        self.ml_need("passed")
        a, k = self.pick(s.arrays), self.pick(s.ints)
        shape = self.rng.randint(0, 8)
        lines = []
        if shape == 0:
            lines.append(f"{k} = (sorted(P, key=_ml_key{self.pick(['', ', reverse=True'])})[{self.pick(['0', '-1'])}] "
                         f"+ {k}) % {INT_MOD}")
            if self.chance(0.6):
                lines.append(f"{a} = clip({a} + {k})")
        elif shape == 1:
            lines.append(f"{a} = clip({a} + {self.pick(['max', 'min'])}(P, key=_ml_key))")
        elif shape == 2:
            lst = self.mlnew("l")
            lines += [f"{lst} = list(P)", f"{lst}.sort(key=_ml_key{self.pick(['', ', reverse=True'])})",
                      f"{a} = clip({a} * {lst}[0] - {lst}[-1])"]
        elif shape == 3:
            lines.append(self.pick([f"{a} = clip({a} + sum(map(_ml_fn, P)))", f"{a} = clip({a} + sum(map(_ml_fn, L)))",
                                    f"{a} = clip({a} + list(map(_ml_fn, [x, {self.arr(s)}]))[-1])"]))
        elif shape == 4:
            lines.append(self.pick([f"{a} = clip({a} + len(list(filter(_ml_keep, P))))",
                                    f"{k} = (sum(filter(_ml_keep, P)) + {k}) % {INT_MOD}"]))
        elif shape == 5:
            lines.append(self.pick([f"{a} = clip(functools.reduce(_ml_add, P, {a}))",
                                    f"{a} = clip({a} + functools.reduce(_ml_add, P))",
                                    f"{a} = clip(functools.reduce(_ml_add, L, {a}))"]))
        elif shape == 6:
            lines.append(f"{a} = clip(functools.reduce(_MLACC, {self.pick(['P', 'L', '[x, y]'])}, {a}))")
        elif shape == 7:  # a key reading array data: the item eager picks, the data decides
            lines.append(self.pick([f"{a} = clip({a} + {self.pick(['max', 'min'])}(L, key=_ml_akey))",
                                    f"{a} = clip({a} - sorted([x, y], key=_ml_akey)[0])"]))
        else:
            lines.append(f"{a} = clip({a} + {self.pick(['max', 'min'])}(P, key=_ml_key) * _ml_fn(1))")
        if len(lines) == 1 and self.chance(0.25):
            lines = [self.ml_staged(s, lines[0])]
        self.emit(indent, "\n".join(lines))

    def static_config(self, s: _Scope, indent: int) -> None:
        """A module-level frozen dataclass config `_MLCFG` (int, float, str and function fields) that
        `_change()` rebinds to a new instance, read in f (`L[:cfg.n]`, `* cfg.scale`, `cfg.act(...)`,
        a helper given it, a Python `if` on its str, an `if` on array data), through a local alias or
        a `dataclasses.replace` of it made in f; sometimes returned in `log`."""
        self.ml_need("config")
        a, k = self.pick(s.arrays), self.pick(s.ints)
        cfg, made = "_MLCFG", self.rng.randint(0, 3)
        if made == 0:
            cfg = self.mlnew("c")
            self.emit(indent, f"{cfg} = _MLCFG")
        elif made == 1:
            cfg = self.mlnew("c")
            self.emit(indent, f"{cfg} = dataclasses.replace(_MLCFG, "
                              f"{self.pick(['scale=0.25', 'scale=_MLCFG.scale * 2', 'n=1', 'tag=_MLCFG.tag + ' + repr('c')])})")
        w, i = self.mlnew("w"), self.mlnew("i")
        uses = [f"for {w} in L[:{cfg}.n]:\n    {a} = clip({a} + {w})", f"{a} = clip({a} * {cfg}.scale)",
                f"{a} = clip({cfg}.act({a}))", f"{a} = clip(_ml_cfg_apply({cfg}, {a}))",
                f"for {i} in range({cfg}.n):\n    {a} = clip({a} + {i} * {cfg}.scale)",
                f'if {cfg}.tag == "ab":\n    {a} = clip({a} + 1)\nelse:\n    {k} = ({k} + len({cfg}.tag)) % {INT_MOD}',
                f"{k} = ({k} + {cfg}.n * 2) % {INT_MOD}",
                self.ml_staged(s, f"{a} = clip({a} * {cfg}.scale)", f"{a} = clip({a} + {cfg}.n)")]
        for text in self.rng.sample(uses, self.rng.randint(1, 2)):
            self.emit(indent, text)
        if indent == 1 and not s.in_function and self.chance(0.3):
            self.ml_tail.append(f"log.append({cfg})")  # a frozen config returned comes back as itself

    def bound_method(self, s: _Scope, indent: int) -> None:
        """A bound method of a module-level object whose attributes `_change()` changes (`_MLOBJ.k`,
        `_MLOBJ.w`), kept in a module dict (`_MHANDLERS["f"]`) or global (`_MLAPPLY`), or given to a
        helper (`_ml_call(_MLOBJ.apply, a)`), called from f (maybe in an `if` on array data); or one
        of an object made in f, kept in a local dict, its attribute changed after."""
        self.ml_need("bound")
        a, k, arr = self.pick(s.arrays), self.pick(s.ints), self.arr(s)
        shape = self.rng.randint(0, 6)
        if shape == 0:
            text = f'{a} = clip(_MHANDLERS["f"]({a}))'
        elif shape == 1:
            text = f'{a} = clip(_MHANDLERS["g"]({arr}) - {a})'
        elif shape == 2:
            text = f"{a} = clip(_MLAPPLY({arr}))"
        elif shape == 3:
            h = self.mlnew("h")
            text = f'{h} = _MHANDLERS["{self.pick(["f", "g"])}"]\n{a} = clip({a} + {h}({arr}))'
        elif shape == 4:
            text = f'{a} = clip(_ml_call({self.pick(["_MLOBJ.apply", "_MHANDLERS[" + repr("g") + "]", "_MLOBJ.shift"])}, {a}))'
        elif shape == 5:  # the method's Python value: a trip count
            i = self.mlnew("i")
            text = self.pick([f'for {i} in range(_MHANDLERS["n"]()):\n    {a} = clip({a} + {i})',
                              f'{k} = ({k} + _MHANDLERS["n"]()) % {INT_MOD}'])
        else:
            o, d = self.mlnew("o"), self.mlnew("d")
            text = (f"{o} = _MLObj({self.pick(['len(xs)', '2', '-1'])})\n{d} = {{\"f\": {o}.apply}}\n"
                    f"{o}.k = {o}.k + 1\n{a} = clip({d}[\"f\"]({a}))")
        if shape in (0, 1, 2, 4) and self.chance(0.3):
            text = self.ml_staged(s, text)
        self.emit(indent, text)

    def tuple_object(self, s: _Scope, indent: int) -> None:
        """An object made in f holding an int and an array attribute (`_MLItem`), put in a tuple
        with a float and given to a module helper that changes `t[0].k += _ML_STEP` (a global
        `_change()` changes) and returns `t[0].k * a` (maybe also writing `t[0].w`): called once, in
        a side of an `if` on array data, or in a loop of `n` trips; its attributes read after."""
        self.ml_need("tuple")
        a, k = self.pick(s.arrays), self.pick(s.ints)
        o, t = self.mlnew("o"), self.mlnew("t")
        self.emit(indent, f"{o} = _MLItem({self.pick(['1', 'len(xs)', '2', k])}, clip({self.arr(s)}))\n"
                          f"{t} = ({o}, {self.pick(['2.0', '1', '0.5'])})")
        call = self.pick([f"_ml_bump({t}, {a})", f"_ml_bump_w({t}, {self.arr(s)})"])
        shape = self.rng.randint(0, 2)
        if shape == 0:
            self.emit(indent, f"{a} = clip({call})")
        elif shape == 1:
            self.emit(indent, self.ml_staged(s, f"{a} = clip({call})", f"{a} = clip({a} - {o}.k)"))
        else:
            i = self.mlnew("i")
            self.emit(indent, f"for {i} in range({self.pick(['n', '2', 'len(xs)'])}):\n    {a} = clip({call})")
        for text in self.rng.sample([f"{k} = ({k} + {o}.k) % {INT_MOD}", f"{a} = clip({a} + {o}.w)",
                                     f"{a} = clip({a} * {t}[0].k)"], self.rng.randint(1, 2)):
            self.emit(indent, text)
        if indent == 1 and not s.in_function and self.chance(0.2):
            self.ml_tail.append(f"log.append({o})")

    def models_late_header(self) -> str:
        """The module code the models stream's latest classes need (written only where drawn), with a
        `_change()` (wrapping the ones before) that changes their globals, and `_GLOBALS` naming them."""
        need = self.ml_needs
        if not need:
            return ""
        lines = ["", ""]
        change, declared, names = [], [], []
        if "implicit" in need:
            lines += ["_ML_SCALE = 2.0", "_ML_LIMIT = 1", "", "",
                      "class _MLBox:", "    hits = 0", "",
                      "    @property", "    def scale(self):", "        return _ML_SCALE", "",
                      "    @property", "    def counted(self):", "        _MLBox.hits += 1",
                      "        return _ML_SCALE + _MLBox.hits", "",
                      "    def __len__(self):", "        return _ML_LIMIT", "",
                      "    def __bool__(self):", "        return _ML_LIMIT > 1", "",
                      "    def __eq__(self, other):", "        return _ML_LIMIT == other", "",
                      "    __hash__ = object.__hash__", "",
                      "    def __getattr__(self, name):", '        if name == "gain":', "            return _ML_SCALE * 2",
                      '        if name == "tally":', "            _MLBox.hits += 1", "            return _MLBox.hits + 0.5",
                      "        raise AttributeError(name)", "", "",
                      "class _MLScaled:", "    def __get__(self, obj, owner=None):", "        return _ML_SCALE + 1", "", "",
                      "class _MLHolder:", "    scale = _MLScaled()", "", "",
                      "_MLBOX = _MLBox()", "_MLHOLDER = _MLHolder()", "", ""]
            declared += ["_ML_SCALE", "_ML_LIMIT"]
            change += [f"    _ML_SCALE = {['_ML_SCALE + 1.5', '-_ML_SCALE', '_ML_SCALE * 2', '_ML_SCALE - 0.5'][need['implicit']]}",
                       "    _ML_LIMIT = (_ML_LIMIT + 1) % 3"]
            names += ["_ML_SCALE", "_ML_LIMIT", "_MLBox.hits"]
        if "passed" in need:
            lines += ["import functools", "", "_ML_W = 1", "", "",
                      "def _ml_key(v):", "    return (v * _ML_W) % 5", "", "",
                      "def _ml_akey(v):", "    return (v * _ML_W).sum()", "", "",
                      "def _ml_fn(v):", "    return v * _ML_W + 1", "", "",
                      "def _ml_keep(v):", "    return v % 3 != _ML_W % 3", "", "",
                      "def _ml_add(acc, v):", "    return acc + v * _ML_W", "", "",
                      "class _MLAcc:", "    def __call__(self, acc, v):", "        return acc + v * _ML_W - 1", "", "",
                      "_MLACC = _MLAcc()", "", ""]
            declared += ["_ML_W"]
            change += [f"    _ML_W = {['_ML_W % 3 + 1', '-_ML_W', '3 - _ML_W', '_ML_W + 2'][need['passed']]}"]
            names += ["_ML_W"]
        if "config" in need:
            lines += ["@dataclasses.dataclass(frozen=True)", "class _MLCfg:", "    n: int = 2", "    scale: float = 0.5",
                      '    tag: str = "a"', "    act: object = jnp.abs", "", "",
                      "def _ml_cfg_apply(cfg, v):", "    return cfg.act(v * cfg.scale) + cfg.n", "", "",
                      "_MLCFG = _MLCfg()", "", ""]
            declared += ["_MLCFG"]
            change += [[
                "    _MLCFG = _MLCfg(n=_MLCFG.n % 3 + 1, scale=_MLCFG.scale * 2, tag=_MLCFG.tag + \"b\",\n"
                "                    act=jnp.negative if _MLCFG.act is jnp.abs else jnp.abs)",
                "    _MLCFG = dataclasses.replace(_MLCFG, n=_MLCFG.n % 3 + 1)",
                "    _MLCFG = _MLCfg(scale=_MLCFG.scale * 0.5, tag=_MLCFG.tag + \"b\")",
                "    _MLCFG = _MLCfg(**dataclasses.asdict(_MLCFG))  # equal, another object"][need["config"]]]
            names += ["_MLCFG"]
        if "bound" in need:
            lines += ["class _MLObj:", "    def __init__(self, k):", "        self.k = k",
                      "        self.w = jnp.ones(3, jnp.float32)", "",
                      "    def apply(self, v):", "        return v * self.k + self.w", "",
                      "    def shift(self, v):", "        return v - self.k", "",
                      "    def size(self):", "        return self.k % 3 + 1", "", "",
                      "def _ml_call(fn, v):", "    return fn(v)", "", "",
                      "_MLOBJ = _MLObj(2)", '_MHANDLERS = {"f": _MLOBJ.apply, "g": _MLOBJ.shift, "n": _MLOBJ.size}',
                      "_MLAPPLY = _MLOBJ.apply", "", ""]
            change += [["    _MLOBJ.k = _MLOBJ.k % 3 + 1", "    _MLOBJ.k = _MLOBJ.k + 1\n    _MLOBJ.w = _MLOBJ.w + 1",
                        "    _MLOBJ.k = -_MLOBJ.k", "    _MLOBJ.w = _MLOBJ.w * 2"][need["bound"]]]
            names += ["_MLOBJ.k", "_MLOBJ.w"]
        if "tuple" in need:
            lines += ["_ML_STEP = 1", "", "",
                      "class _MLItem:", "    def __init__(self, k, w):", "        self.k = k", "        self.w = w", "", "",
                      "def _ml_bump(t, a):", "    t[0].k += _ML_STEP", "    return t[0].k * a", "", "",
                      "def _ml_bump_w(t, a):", "    t[0].w = clip(t[0].w + a)", "    t[0].k += _ML_STEP",
                      "    return t[0].k * a + t[1]", "", ""]
            declared += ["_ML_STEP"]
            change += ["    _ML_STEP = _ML_STEP % 2 + 1"]
            names += ["_ML_STEP"]
        lines += ['_change_models_late = globals().get("_change")', "", "", "def _change():"]
        if declared:
            lines.append(f"    global {', '.join(declared)}")
        lines += ["    if _change_models_late is not None:", "        _change_models_late()", *change, "", "",
                  f'_GLOBALS = globals().get("_GLOBALS", ()) + {tuple(names)!r}', ""]
        return "\n".join(lines) + "\n"

    # -- the models stream's last classes (drawn from `models-last-<seed>`) --------------------
    def mxnew(self, root: str) -> str:
        """A name for the models stream's last classes (`mx` + root + a counter of their own)."""
        self.mxfresh += 1
        return f"mx{root}{self.mxfresh}"

    def mx_need(self, need: str) -> None:
        self._need(self.mx_needs, need)

    def mx_grad_array(self, s: _Scope) -> str:
        """A writable array, `a0` (x, where nothing rebound it) more often: f's gradient goes through it."""
        return "a0" if "a0" in s.arrays and self.chance(0.5) else self.pick(s.arrays)

    def ternary_own_list(self, s: _Scope, indent: int) -> None:
        """`lst = [a]`, then `lst = [clip(a + 1)] if <array test> else lst` (a list only that name
        holds: each side's list is the one eager keeps), appended to and used after; or the refused
        twin, where another local holds the old list too (`other = lst` before): whether the append
        reaches `other` is then decided by data."""
        a, b, k = self.pick(s.arrays), self.pick(s.arrays), self.pick(s.ints)
        lst = self.mxnew("l")
        two = self.chance(0.3)
        old = f"[{a}, clip({b} - 1)]" if two else f"[{a}]"
        new = (f"[clip({self.arr(s)} + 1), {self.arr(s)}]" if two
               else f"[clip({self.pick([a, self.arr(s)])} + {self.pick(['1', '2', 'y'])})]")
        twin = self.chance(0.3)
        other = self.mxnew("o")
        lines = [f"{lst} = {old}"]
        if twin:
            lines.append(f"{other} = {lst}")
        test = self.lazy_test(s)
        lines.append(f"{lst} = {new} if {test} else {lst}" if self.chance(0.7)
                     else f"{lst} = {lst} if {test} else {new}")
        for _ in range(self.rng.randint(1, 2)):
            lines.append(f"{lst}.append({self.pick([f'clip({self.arr(s)} * 2)', self.arr(s), f'clip({lst}[0] + 1)'])})")
        uses = [f"{a} = clip({a} + {lst}[-1])", f"{a} = clip({a} - {lst}[0])", f"{b} = clip({b} + sum({lst}))",
                f"{k} = ({k} + len({lst})) % {INT_MOD}", f"{a} = clip({a} * len({lst}) - {lst}[1])"]
        lines += self.rng.sample(uses, self.rng.randint(1, 2))
        if twin:  # the old list read after: one item or two, as the data decided
            lines.append(self.pick([f"{k} = ({k} + len({other})) % {INT_MOD}", f"{b} = clip({b} + {other}[-1])",
                                    f"{b} = clip({b} + sum({other}))"]))
        self.emit(indent, "\n".join(lines))

    def loop_else_return(self, s: _Scope, indent: int) -> None:
        """A module helper whose `for` (over `range(v.shape[0])` or the array's items) or `while`
        returns early on array data and whose `else:` returns (no `break`), called from f; its
        results (a Python int the data picks and an array) used in f."""
        self.mx_need("loop_else")
        a, b, k = self.pick(s.arrays), self.pick(s.arrays), self.pick(s.ints)
        arr, c = self.arr(s), self.rng.randint(-2, 4)
        helper = self.pick(["_mx_find", "_mx_scan", "_mx_walk", "_mx_first"])
        if helper == "_mx_first":  # one value
            call = f"_mx_first({arr}, {c})"
            text = self.pick([f"{a} = clip({a} + {call})", f"{a} = clip({a} * {call})"])
            if self.chance(0.25):
                text = self.ml_staged(s, text, f"{a} = clip({a} - 1)" if self.chance(0.5) else None)
            self.emit(indent, text)
            return
        i, v = self.mxnew("i"), self.mxnew("v")
        lines = []
        if self.chance(0.7):
            lines.append(f"{i}, {v} = {helper}({arr}, {c})")
        else:
            r = self.mxnew("r")
            lines += [f"{r} = {helper}({arr}, {c})", f"{i}, {v} = {r}[0], {r}[1]"]
        uses = [f"{a} = clip({a} + {v})", f"{k} = ({k} + {i}) % {INT_MOD}", f"{b} = clip({b} * ({i} + 2) - {v})",
                f"if {i} < 0:\n    {a} = clip({a} - 1)\nelse:\n    {a} = clip({a} + {v})",
                f"{a} = clip({a} + {self.arr(s)}[{i} % 3])"]
        lines += self.rng.sample(uses, self.rng.randint(1, 3))
        self.emit(indent, "\n".join(lines))

    def counter_while(self, s: _Scope, indent: int) -> None:
        """`it = 0` / `while <array test> and it < N:` (N a constant, or `_MX_N`, a global `_change()`
        changes) stepping `it += 1` once at the body's top level, changing an array f's gradient goes
        through; maybe a traced `break` before the step, or a `continue` after it (no bound then);
        the counter and the array used after."""
        a, k = self.mx_grad_array(s), self.pick(s.ints)
        it = self.mxnew("it")
        if self.chance(0.35):
            self.mx_need("bound")
            bound = "_MX_N"
        else:
            bound = str(self.rng.randint(1, 5))
        c = self.rng.randint(-3, 6)
        test = self.pick([f"{a}.sum() > {c}", f"{a}.max() > {c}", f"({a} > {c}).any()", f"jnp.abs({a}).sum() > {c}"])
        cond = f"{test} and {it} < {bound}" if self.chance(0.75) else f"{it} < {bound} and {test}"
        step = self.pick([f"{a} = clip({a} * 0.5 + {self.pick(['1', '-1', 'y', '0.5'])})", f"{a} = clip({a} - 1)",
                          f"{a} = clip({a} * 0.5 - {self.arr(s)} * 0.25)", f"{a} = clip({a} - {a} * 0.5)"])
        jump = self.rng.randint(0, 3)  # 0: a traced break before the step, 1: a continue after it
        body = []
        if jump == 0:
            body.append(f"if {self.lazy_test(s, it)}:\n    break")
        body += [f"{it} += 1", step] if self.chance(0.7) else [step, f"{it} += 1"]
        if jump == 1:
            other = self.pick(s.arrays)
            body.append(f"if {self.lazy_test(s, it)}:\n    continue\n{other} = clip({other} + {self.pick(['1', a])})")
        self.emit(indent, f"{it} = 0\nwhile {cond}:")
        self.emit(indent + 1, "\n".join(body))
        uses = [f"{k} = ({k} + {it}) % {INT_MOD}", f"{a} = clip({a} + {it})", f"{a} = clip({a} * ({it} + 1))"]
        self.emit(indent, "\n".join(self.rng.sample(uses, self.rng.randint(1, 2))))

    def math_float(self, s: _Scope, indent: int) -> None:
        """A Python float a staged `if` on array data picks (`s = 0.0; if x.sum() > t: s = -2.5`),
        given to `math.copysign(1.0, s)` and `math.fabs(s)`, used in arithmetic."""
        self.mx_need("math")
        a, b, k = self.pick(s.arrays), self.pick(s.arrays), self.pick(s.ints)
        f = self.mxnew("s")
        first, second = self.rng.sample(["0.0", "-2.5", "1.5", "-0.5", "3.0", "-0.0"], 2)
        test = self.lazy_test(s)
        shape = self.rng.randint(0, 2)
        if shape == 0:
            text = f"{f} = {first}\nif {test}:\n    {f} = {second}"
        elif shape == 1:
            text = f"if {test}:\n    {f} = {first}\nelse:\n    {f} = {second}"
        else:
            text = f"{f} = {first} if {test} else {second}"
        uses = [f"{a} = clip({a} * math.copysign(1.0, {f}))", f"{a} = clip({a} + math.fabs({f}))",
                f"{b} = clip({b} - math.copysign({self.pick(['2', '0.5', '1'])}, {f}) * math.fabs({f}))",
                f"{k} = ({k} + int(math.fabs({f}) * 2)) % {INT_MOD}",
                f"if math.copysign(1.0, {f}) < 0:\n    {a} = clip({a} - 1)",
                f"{a} = clip({a} + math.copysign(math.fabs({f}) + 1, {self.arr(s)}.sum()))"]
        self.emit(indent, text + "\n" + "\n".join(self.rng.sample(uses, self.rng.randint(1, 3))))
        if indent == 1 and not s.in_function and self.chance(0.2):
            self.emit(indent, f"log.append(math.copysign(1.0, {f}))")

    def keyword_only(self, s: _Scope, indent: int) -> None:
        """A module helper with keyword-only parameters (`_mx_kw(v, *, scale=1.0, flip=False,
        shift=0)`, `_mx_kw_need(v, w, *, k, mode="add")`) called from f with keywords in varying
        orders and Python values (int, float, bool), maybe in a side of an `if` on array data."""
        self.mx_need("keyword")
        a = self.pick(s.arrays)
        texts = []
        for _ in range(self.rng.randint(1, 2)):
            if self.chance(0.6):
                values = {"scale": self.pick(["2", "0.5", "-1.5", "True", "1"]),
                          "flip": self.pick(["True", "False", "1", "0"]),
                          "shift": self.pick(["1", "-2", "0.5", "False"])}
                given = self.rng.sample(sorted(values), self.rng.randint(0, 3))
                args = ", ".join(f"{name}={values[name]}" for name in given)
                if given and self.chance(0.15):
                    args = "**{" + ", ".join(f'"{name}": {values[name]}' for name in given) + "}"
                call = f"_mx_kw({self.arr(s)}{', ' + args if args else ''})"
            else:
                values = {"k": self.pick(["2", "-1", "0.5", "False", "True"]), "mode": self.pick(['"add"', '"mul"'])}
                given = ["k"] + (["mode"] if self.chance(0.6) else [])
                self.rng.shuffle(given)
                call = f"_mx_kw_need({self.arr(s)}, {self.arr(s)}, " + ", ".join(f"{name}={values[name]}" for name in given) + ")"
            texts.append(self.pick([f"{a} = clip({call})", f"{a} = clip({a} + {call})"]))
        text = "\n".join(texts)
        if self.chance(0.3):
            text = self.ml_staged(s, text, f"{a} = clip(_mx_kw({a}, flip=True))" if self.chance(0.4) else None)
        self.emit(indent, text)

    def models_last_header(self) -> str:
        """The module code the models stream's last classes need (written only where drawn), with a
        `_change()` (wrapping the ones before) that changes their globals, and `_GLOBALS` naming them."""
        need = self.mx_needs
        if not need:
            return ""
        lines = ["", ""]
        if "math" in need:
            lines += ["import math", "", ""]
        if "loop_else" in need:
            lines += ["def _mx_find(v, c):", "    for i in range(v.shape[0]):", "        if v[i] < c:",
                      "            return i, v[i]", "    else:", "        return -1, v[0] * 0", "", "",
                      "def _mx_scan(v, c):", "    i = 0", "    while i < 3:", "        if v[i] > c:",
                      "            return i, v[i] * 2", "        i += 1", "    else:", "        return -1, v.sum()", "", "",
                      "def _mx_walk(v, c):", "    i = 0", "    while i < 4 and v.sum() > c - 6:",
                      "        if v[i % 3] > c:", "            return i, v[i % 3] * 2", "        v = v - 1",
                      "        i += 1", "    else:", "        return i, v.sum() * 0.5", "", "",
                      "def _mx_first(v, c):", "    for e in v:", "        if e > c:", "            return e",
                      "    else:", "        return v.min() - 1", "", ""]
        if "keyword" in need:
            lines += ["def _mx_kw(v, *, scale=1.0, flip=False, shift=0):", "    out = v * scale + shift",
                      "    if flip:", "        out = -out", "    return out", "", "",
                      'def _mx_kw_need(v, w, *, k, mode="add"):', '    if mode == "add":', "        return v + w * k",
                      "    return v * k - w", "", ""]
        if "bound" in need:
            lines += ["_MX_N = 2", "", "", '_change_models_last = globals().get("_change")', "", "",
                      "def _change():", "    global _MX_N", "    if _change_models_last is not None:",
                      "        _change_models_last()",
                      f"    _MX_N = {['_MX_N % 4 + 1', '_MX_N + 2', '5 - _MX_N', '(_MX_N * 2) % 5'][need['bound']]}",
                      "", "", "_GLOBALS = globals().get(\"_GLOBALS\", ()) + ('_MX_N',)", ""]
        return "\n".join(lines) + "\n"

    def cnew(self, root: str) -> str:
        """A name for the calls stream (`z` + root + its own counter)."""
        self.cfresh += 1
        return f"z{root}{self.cfresh}"

    def draw_calls(self) -> None:
        """Whether this program draws the calls stream (about one in three), which of its classes
        (`CALL_FEATURES`, each about one in two of those; at least one), and how `_change()`
        changes the module between calls."""
        c = self.calls
        if c.random() >= CALLS_P:
            return
        chosen = [name for name in CALL_FEATURES if c.random() < 0.5]
        self.call_features = frozenset(chosen or [c.choice(CALL_FEATURES)])
        f = self.call_features
        self.helper_defaults = c.choice([("2.0", "1.0"), ("2", "1"), ("0.5", "-1.0"), ("3", "0.5")])
        self.defaults_change = c.choice([
            ("(_helper.__defaults__[0] + 1,)", '{"b": _helper.__kwdefaults__["b"] * 2}'),
            ("(-_helper.__defaults__[0],)", '{"b": TICK}'),
            ("(0.5 if _helper.__defaults__[0] != 0.5 else 2,)", '{"b": _helper.__kwdefaults__["b"] - 1.5}'),
            ("(TICK * 2,)", "_helper.__kwdefaults__")])
        self.bag_change = c.choice(["keep", "keep", "fresh", "grow"])
        self.knob_start = c.random() < 0.5  # whether Knob has `gain` at first
        self.knob_change = c.choice(["toggle", "toggle", "set", "drop"])
        self.outside_change = c.choice(["append", "rebind", "nested", "none", "grow"])
        self.tick_start = c.choice([0, 0, 1])
        if "outside" in f:
            self.returned += c.sample(["ITEMS", 'REG["lst"]', "REG", '[ITEMS, REG["d"]]', '{"r": REG["lst"]}',
                                       'REG["d"]', "(ITEMS, ITEMS)"], c.randint(1, 2))
        if "defaults" in f and c.random() < 0.6:
            self.returned += c.sample(["_bag(TICK)", "_helper(2)", "_helper(TICK, b=0.5)", "_bag(-1)[-2:]",
                                       "_bag.__defaults__[0]"], c.randint(1, 2))
        if "attr" in f and c.random() < 0.3:
            self.returned.append(c.choice(['getattr(Knob, "gain", None)', 'hasattr(Knob2, "gain")']))

    def calls_header(self) -> str:
        """The calls stream's module-level code: `TICK` (a global `_change()` bumps), a helper
        with defaults and one with a mutable default list (`_change()` replaces the defaults),
        a module list and dict f returns (`_OUTSIDE` names the objects whose identity the runner
        compares), a class `Knob` that gains or loses `gain`; `_change()` (wrapping the ones
        before) and `_GLOBALS`."""
        f = self.call_features
        k, b = self.helper_defaults
        lines = ["", "", "import io", "import random", "import sys", "", "",
                 f"TICK = {self.tick_start}", 'NAMES = ("gain", "base")', "WBUF = io.StringIO()", "RNGX = random.Random(7)",
                 "", "", "class _Ctx:", "    def __init__(self, log):", "        self.log = log", "        self.n = 0", "",
                 "    def __enter__(self):", '        print("enter", len(self.log))', "        self.n = len(self.log)",
                 "        return self", "", "    def __exit__(self, *exc):", '        print("exit", exc[0] is None)',
                 "        return False", "", "",
                 f"def _helper(v, k={k}, *, b={b}):", "    return v * k + b", "", "",
                 "def _bag(v, seen=[]):", "    seen.append(v)", "    return seen", "", "",
                 "ITEMS = [1, 2]", 'REG = {"lst": [3], "d": {"a": 1}, "n": 0}', "", "",
                 "class Knob:", "    base = 2"]
        if self.knob_start:
            lines.append("    gain = 3")
        lines += ["", "", "class Knob2(Knob):", "    pass", "", "",
                  '_change_calls = globals().get("_change")', "", "",
                  "def _change():", "    global TICK" + (", ITEMS" if "outside" in f else ""),
                  "    if _change_calls is not None:", "        _change_calls()", "    TICK = TICK + 1"]
        if "defaults" in f:
            new_defaults, new_kwdefaults = self.defaults_change
            lines += [f"    _helper.__defaults__ = {new_defaults}", f"    _helper.__kwdefaults__ = {new_kwdefaults}"]
            if self.bag_change == "fresh":
                lines.append("    _bag.__defaults__ = ([TICK],)")
            elif self.bag_change == "grow":
                lines.append("    _bag.__defaults__[0].append(-TICK)")
        if "outside" in f:
            lines += {"append": ["    ITEMS.append(TICK)"], "rebind": ["    ITEMS = [TICK, *ITEMS]"],
                      "nested": ['    REG["lst"] = [TICK]', '    REG["d"]["a"] += 1'],
                      "grow": ['    REG["lst"].append(TICK)', '    REG["n"] = TICK'], "none": []}[self.outside_change]
        if "attr" in f:
            lines += {"toggle": ['    if "gain" in vars(Knob):', "        del Knob.gain", "    else:",
                                 "        Knob.gain = TICK * 2"],
                      "set": ["    Knob.gain = TICK + 1"],
                      "drop": ['    if "gain" in vars(Knob):', "        del Knob.gain", "    else:",
                               "        Knob.gain = 5"]}[self.knob_change]
        names = ["TICK", "_helper.__defaults__", "_helper.__kwdefaults__", "_bag.__defaults__", "ITEMS", "REG",
                 "Knob.gain", "WBUF"]
        lines += ["", "", '_GLOBALS = globals().get("_GLOBALS", ()) + (' + ", ".join(f'"{n}"' for n in names) + ")",
                  # the objects outside f's arguments whose identity the runner compares (expressions)
                  """_OUTSIDE = ("ITEMS", "REG", 'REG["lst"]', 'REG["d"]', "_bag.__defaults__[0]")""", ""]
        return "\n".join(lines) + "\n"

    def calls_statement(self, s: _Scope, indent: int, only: str | None = None) -> None:
        """Sometimes a statement of a calls class this program draws (`self.rng` is the calls
        stream here); with `only`, one statement of that class."""
        f = self.call_features if only is None else {only}
        p = 0.12 if only is None else 1.0
        top = indent == 1
        emitters = {"try_else": self.try_else, "defaults": self.default_call, "outside": self.outside_use,
                    "attr": self.attr_read, "py_raise": self.python_raise, "int_ops": self.int_ops,
                    "streams": self.stream_use, "ternary": self.container_ternary}
        for name in CALL_FEATURES:  # (in this order: each draws from the stream)
            if name == "py_raise" and (not top or "xs" in s.frozen):
                continue  # (a raise at f's level only, while the caller's xs may change)
            if name in f and self.chance(p):
                self.call_shown.add(name)
                emitters[name](s, indent)

    def stream_use(self, s: _Scope, indent: int) -> None:
        """Python effects a program makes on every call: writes to the module file `WBUF` (in a
        staged branch too), to `sys.stdout`, a print naming `sys.stdout`, a class-based context
        manager that prints, and a draw of the module's random numbers `RNGX` (refused in a
        staged branch)."""
        a, k = self.pick(s.arrays), self.pick(s.ints)
        self.emit(indent, self.pick([
            'WBUF.write(f"w{TICK} ")', f'{k} = (WBUF.write("ww") + {k}) % {INT_MOD}',
            f'if {self.cond(s)}:\n    WBUF.write("c{self.rng.randint(0, 9)} ")',
            'sys.stdout.write("so\\n")', f'print("sp", {self.call_py_int(s)}, file=sys.stdout)',
            f"with _Ctx(log):\n    {a} = clip({a} + 1)",
            f"with _Ctx(log) as zc:\n    {a} = clip({a} * 2)\n    log.append(zc.n)",
            f"{k} = ({k} + RNGX.randint(0, 9)) % {INT_MOD}", f"{a} = clip({a} + RNGX.random())"]))

    def container_ternary(self, s: _Scope, indent: int) -> None:
        """A conditional expression (on array data or Python's) whose sides give one list from
        before it, or the same list inside a tuple, changed through the result; or two lists
        (refused on array data: the data would pick which object)."""
        a, b = self.pick(s.arrays), self.pick(s.arrays)
        zr = self.cnew("r")
        cond = self.cond(s)
        options = [f"{zr} = log if {cond} else log\n{zr}.append({self.call_py_int(s)})",
                   f"{zr} = (log, {a}) if {cond} else (log, {b})\n{zr}[0].append(len({zr}[0]))\n{a} = clip({zr}[1])",
                   f"{zr} = obj.cache if {cond} else obj.cache\n{a} = clip({a} + len({zr}))",
                   f"{zr} = log if {cond} else P\n{a} = clip({a} + len({zr}))"]
        if "L" not in s.frozen:
            options.append(f"{zr} = L if {cond} else L\n{a} = clip({a} + len({zr}))")
        self.emit(indent, self.pick(options))

    def call_py_int(self, s: _Scope) -> str:
        """A Python int (never traced) for the calls stream."""
        return self.pick(["len(L)", "len(log)", "TICK", "len(P)", str(self.rng.randint(0, 9))])

    def jump_test(self, s: _Scope, counter: str | None) -> str:
        """A test for a jump: on array data (staged) or Python's (a counter, `TICK`, a length)."""
        c = self.rng.randint(0, 3)
        options = [f"{self.arr(s)}.sum() > {self.rng.randint(-2, 6)}", f"TICK == {self.rng.randint(0, 2)}",
                   f"len(L) > {self.rng.randint(1, 3)}", self.cond(s)]
        if counter:
            options += [self.traced_test(s, counter), f"{counter} == {c}", f"{counter} >= {c}"]
        return self.pick(options)

    def try_else(self, s: _Scope, indent: int) -> None:
        """`try`/`except`/`else` (maybe `finally`) whose body may `return`, `break` or `continue`
        (on array data or Python's) or raise (caught), its `else` changing a counter, a local list
        of Python values or an array used after; in a loop made here (zero, one or several trips),
        the loop around, at f's level, or in a nested function."""
        a, b, k = self.pick(s.arrays), self.pick(s.arrays), self.pick(s.ints)
        zc, zl = self.cnew("c"), self.cnew("l")
        if self.chance(0.2):
            self.nested_try_else(s, indent)
            return
        self.emit(indent, f"{zc} = {self.rng.randint(0, 2)}\n{zl} = []")
        where = self.pick(["loop", "loop", "outer", "flat"])
        if where == "outer" and s.loop_depth == 0:
            where = "loop"
        body_indent, counter, inner = indent, None, s
        if where == "loop":
            zi = self.cnew("i")
            counter = zi
            inner = s.child(int_reads=s.int_reads + [zi], loop_depth=s.loop_depth + 1)
            bound = self.pick(["n", "3", "2", "1", "0", "len(xs)", "n + 1"])
            if self.chance(0.7):
                self.emit(indent, f"for {zi} in range({bound}):")
            else:
                self.emit(indent, f"{zi} = 0\nwhile {zi} < {bound}:\n    {zi} += 1")
            body_indent = indent + 1
        jumps = ["return"] if not s.in_function else []
        if inner.loop_depth > 0:
            jumps += ["break", "continue", "break", "continue"]
        jump = self.pick(jumps) if jumps and self.chance(0.85) else None
        body = [f"{a} = clip({a} + {self.arr_expr(inner)})"]
        if jump == "return":
            jump = self.return_text("[fn(a0) for fn in FN]")
        if jump is not None:  # (the body's lines are written at its own level, indented below)
            if self.chance(0.85):
                body.append(f"if {self.jump_test(inner, counter)}:\n    " + jump.replace("\n", "\n    "))
            else:
                body.append(jump)
        errors = self.pick(["ValueError", "(ValueError, KeyError)", "KeyError", "Exception"])
        if jump is None or self.chance(0.4):
            error = self.pick(['ValueError("zv")', 'KeyError("zk")'])
            test = self.pick([f"TICK == {self.rng.randint(0, 2)}", f"len(L) > {self.rng.randint(1, 3)}"]
                             + ([f"{counter} == {self.rng.randint(0, 2)}"] if counter else [])
                             + [self.jump_test(inner, counter)])
            if errors == "KeyError" and "Value" in error or errors == "ValueError" and "Key" in error:
                errors = "(ValueError, KeyError)"
            body.insert(self.rng.randint(0, len(body)), f"if {test}:\n    raise {error}")
        if self.chance(0.5):
            body.append(f"{b} = clip({b} - 1)")
        handler = self.pick([f"{k} = ({k} + 5) % {INT_MOD}", "log.append(-1)", f"{zc} -= 1",
                             f"{b} = clip({b} * 0.5)"])
        value = self.pick([counter or "1", self.call_py_int(s), str(self.rng.randint(0, 9))])
        effects = [f"{zc} += 1", f"{zl}.append({value})", f"{b} = clip({b} * 2)", f"log.append({self.rng.randint(20, 29)})",
                   f"{zc} = {zc} + {self.pick(['2', 'len(L)', 'TICK'])}"]
        chosen = self.rng.sample(effects, self.rng.randint(1, 2))
        lines = ["try:", *("    " + line.replace("\n", "\n    ") for line in body),
                 f"except {errors}:", f"    {handler}", "else:", *("    " + line for line in chosen)]
        if self.chance(0.4):
            lines += ["finally:", f"    {self.pick([f'log.append({self.rng.randint(30, 39)})', f'{zc} = {zc} * 2', f'{zl}.append(-1)'])}"]
        self.emit(body_indent, "\n".join(lines))
        uses = [f"{k} = ({k} + {zc}) % {INT_MOD}", f"{a} = clip({a} + len({zl}))", f"log.append({zc})",
                f"{a} = clip({a} + sum({zl}))", f"log.append(len({zl}))", f"{a} = clip({a} * {zc})"]
        if "P" not in s.frozen:
            uses.append(f"P.extend({zl})")
        for text in self.rng.sample(uses, self.rng.randint(1, 2)):
            self.emit(indent, text)

    def nested_try_else(self, s: _Scope, indent: int) -> None:
        """A nested function whose `try` returns (on array data or Python's), maybe from a loop,
        its `else` changing `v` (only when the body ran to its end)."""
        h, a = self.cnew("h"), self.pick(s.arrays)
        test = self.pick([f"v.sum() > {self.rng.randint(-2, 6)}", f"v[0] > {self.rng.randint(-2, 3)}",
                          f"TICK == {self.rng.randint(0, 2)}", f"len(L) > {self.rng.randint(1, 3)}"])
        effect = self.pick(["v = clip(v * 3)", "v = clip(v - 2)", "log.append(8)"])
        if self.chance(0.5):
            self.emit(indent, f"def {h}(v):\n    try:\n        if {test}:\n            return clip(v * 2)\n"
                              f"        v = clip(v + 1)\n    except ValueError:\n        v = clip(v - 1)\n"
                              f"    else:\n        {effect}\n    return v")
        else:
            j = self.cnew("j")
            jump = self.pick(["return clip(v + 4)", "break", "continue"])
            self.emit(indent, f"def {h}(v):\n    for {j} in range({self.pick(['3', 'n', '2', '0'])}):\n"
                              f"        try:\n            v = clip(v + {j})\n"
                              f"            if {test.replace('TICK', j)}:\n                {jump}\n"
                              f"        except KeyError:\n            v = clip(v - 1)\n"
                              f"        else:\n            {effect}\n    return v")
        self.emit(indent, f"{a} = {h}({self.arr_expr(s)})")

    def default_call(self, s: _Scope, indent: int) -> None:
        """Calls of module helpers whose defaults `_change()` replaces between calls: `_helper(v,
        k=..., *, b=...)`, and `_bag(v, seen=[])`, which appends to its default list and returns it."""
        a, k = self.pick(s.arrays), self.pick(s.ints)
        zb, zf = self.cnew("b"), self.cnew("f")
        self.emit(indent, self.pick([
            f"{a} = clip(_helper({self.arr_expr(s)}))", f"{a} = clip(_helper({a}, {self.pick(['3', '-1', '0.5'])}))",
            f"{a} = clip(_helper({a}, b={self.call_py_int(s)}))", f"{a} = clip(_helper({a}, k={self.arr(s)}.max()))",
            f"{k} = len(_bag({self.call_py_int(s)})) % {INT_MOD}",
            f"{zb} = _bag({self.call_py_int(s)})\n{a} = clip({a} + len({zb}) + {zb}[-1])",
            f"if {self.cond(s)}:\n    {a} = clip(_helper({a}))\nelse:\n    {a} = clip(_helper({a}, b=2))",
            f"{zf} = _helper({self.call_py_int(s)})\n{a} = clip({a} * ({zf} % 5))",
            f"{zf} = _helper(1, b=0)\nlog.append({zf})",
            f"{k} = int(_helper({self.call_py_int(s)})) % {INT_MOD}",
            f"{zb} = _bag({self.call_py_int(s)})\nlog.append(sum({zb}))"]))

    def outside_use(self, s: _Scope, indent: int) -> None:
        """Reads and Python-valued changes of the module list `ITEMS` and dict `REG` (f may return
        them: the runner compares their identity, `_OUTSIDE`)."""
        a, k = self.pick(s.arrays), self.pick(s.ints)
        self.emit(indent, self.pick([
            f"{a} = clip({a} + len(ITEMS))", f'{a} = clip({a} + sum(REG["lst"]))',
            f"{k} = ({k} + ITEMS[-1]) % {INT_MOD}", f"ITEMS.append({self.call_py_int(s)})",
            f'REG["lst"].append({self.call_py_int(s)})', 'REG["n"] = REG["n"] + 1',
            f'REG["d"]["a"] = {self.call_py_int(s)}', f'if len(ITEMS) > {self.rng.randint(2, 4)}:\n    {a} = clip({a} - 1)']))

    def attr_read(self, s: _Scope, indent: int) -> None:
        """A class attribute `Knob.gain` that `_change()` sets or deletes between calls, read under
        `try`/`except AttributeError` (through the class, a subclass, an instance, `getattr` of a
        name string), or by `getattr` with a default or `hasattr`."""
        a, b, k = self.pick(s.arrays), self.pick(s.arrays), self.pick(s.ints)
        zs, zn = self.cnew("s"), self.cnew("n")
        default = self.pick(["-1", "0", "1", "0.5"])
        holder = self.pick(["Knob", "Knob", "Knob2", "Knob()", "Knob2()"])
        use = self.pick([f"{a} = clip({a} + {zs})", f"{a} = clip({a} * {zs})", f"log.append({zs})"])
        self.emit(indent, self.pick([
            f"try:\n    {zs} = {holder}.gain\nexcept AttributeError:\n    {zs} = {default}\n{use}",
            f'{zn} = "gain"\ntry:\n    {zs} = getattr({holder}, {zn})\nexcept AttributeError:\n    {zs} = {default}\n{use}',
            f'{zn} = NAMES[TICK % 2]\ntry:\n    {zs} = getattr(Knob, {zn})\nexcept AttributeError:\n    {zs} = {default}\n{use}',
            f'try:\n    {a} = clip({a} * getattr(Knob, "ga" + "in"))\nexcept AttributeError:\n    {a} = clip({a} - 1)',
            f"try:\n    {a} = clip({a} + 1)\n    {b} = clip({b} * {holder}.gain)\nexcept AttributeError:\n"
            f"    {k} = ({k} + 2) % {INT_MOD}\nelse:\n    {b} = clip({b} - 1)",
            f'{zs} = getattr({holder}, "gain", {default})\n{use}',
            f'if hasattr(Knob, "gain"):\n    {a} = clip({a} + Knob.gain)\nelse:\n    {k} = ({k} + Knob.base) % {INT_MOD}']))

    def python_raise(self, s: _Scope, indent: int, at_end: bool = False) -> None:
        """A `raise ValueError` Python decides (on `TICK`, which `_change()` bumps, on `n`, on a
        length), after prints of Python and array values and changes of the caller's `xs` (a
        Python value appended; popped again after, unless at f's end)."""
        value = self.pick(["7", "TICK", "len(L)", "-1", "n"])
        lines = [self.pick([f'print("z{self.cnew("")}", {self.call_py_int(s)}, {self.call_py_int(s)})',
                            'print(f"zt{TICK}-{len(xs)}")']),
                 self.pick([f'print("za", {self.arr(s)})', f'print("zs", {self.arr(s)}.sum(), TICK)',
                            f'print("zm", {self.arr(s)}.max(), end=";")'])]
        if self.chance(0.5):
            lines.reverse()
        lines.append(f"xs.append({value})")
        if self.chance(0.3):
            lines.append(f"xs[0] = clip(xs[0] + {self.rng.randint(1, 3)})")
        test = self.pick([f"TICK == {self.rng.randint(0, 3)}", f"TICK >= {self.rng.randint(2, 3)}",
                          f"n == {self.pick(['0', '1', '3'])}", f"len(xs) > {self.rng.randint(2, 4)}",
                          f"TICK + n > {self.rng.randint(1, 4)}"])
        message = self.pick(['"stop"', 'f"stop at {TICK} with {len(xs)}"', '"stop %d" % len(L)', 'f"stop {n}"'])
        lines.append(f"if {test}:\n    raise ValueError({message})")
        if not at_end:
            lines.append("xs.pop()")
        self.emit(indent, "\n".join(lines))

    def int_ops(self, s: _Scope, indent: int) -> None:
        """Python ints the data decides (a counter an `if` on array data changes, maybe in a loop
        of zero, one or several trips) shifted (`<<`, sometimes beyond int32), and `int()` /
        `round()` of a float the data decides (sometimes beyond 2**31): eager's Python int, or
        dy2st's `IntOverflowError` where it leaves int32."""
        a, k = self.pick(s.arrays), self.pick(s.ints)
        zn, zf = self.cnew("n"), self.cnew("f")
        if self.chance(0.6):
            self.emit(indent, f"{zn} = {self.rng.randint(0, 3)}")
            loop = self.chance(0.5)
            inner, at = s, indent
            if loop:
                zi = self.cnew("i")
                self.emit(indent, f"for {zi} in range({self.pick(['n', '3', '1', '0', 'n + 1'])}):")
                inner = s.child(int_reads=s.int_reads + [zi], loop_depth=s.loop_depth + 1)
                at = indent + 1
                test = self.traced_test(inner, zi)
            else:
                test = f"{self.arr(s)}.{self.pick(['sum', 'max', 'min'])}() > {self.rng.randint(-2, 6)}"
            up, down = self.pick(["1", "2", "3"]), self.pick(["1", "0", "2"])
            self.emit(at, f"if {test}:\n    {zn} += {up}" + (f"\nelse:\n    {zn} -= {down}" if self.chance(0.7) else ""))
            shift = self.pick(["1", "2", "3", "4"])
            big = self.pick(["28", "29", "30"])
            self.emit(indent, self.pick([
                f"{k} = (({zn} << {shift}) + {k}) % {INT_MOD}", f"log.append({zn} << {big})",
                f"{a} = clip({a} + ({zn} << {shift}))", f"{k} = (1 << ({zn} % 5)) % {INT_MOD}",
                f"{k} = (({zn} % 4) << n) % {INT_MOD}", f"{k} = (({zn} << {big}) >> {big}) % {INT_MOD}"]))
        else:
            mult = self.pick(["1000", "3e7", "4e8", "2.5e9", "0.5"])
            other = self.pick(["2.5", "-1.5", "3e9", "7.0", "-2.5e9"])
            self.emit(indent, f"if {self.arr(s)}.{self.pick(['sum', 'max', 'min'])}() > {self.rng.randint(-2, 6)}:\n"
                              f"    {zf} = {self.arr(s)}.sum() * {mult}\nelse:\n    {zf} = {other}")
            self.emit(indent, self.pick([
                f"{k} = int({zf}) % {INT_MOD}", f"log.append(int({zf}))", f"{k} = round(float({zf})) % {INT_MOD}",
                f"log.append(round({zf}))", f"{a} = clip({a} + int({zf}) % 7)"]))

    def local_class(self, s: _Scope, indent: int) -> None:
        """A class defined here: Python control flow and `and` in its own body (run as written,
        in the class's scope), and a method with an `if` on its argument (staged when traced)."""
        a, c = self.pick(s.arrays), self.new("C")
        self.emit(indent, f"class {c}:\n    base = {self.rng.randint(0, 3)}\n    if len(L) > 2:\n"
                          f"        base = base + 1\n    twice = base and 2\n\n    def apply(self, v):\n"
                          f"        if v.sum() > {self.rng.randint(-2, 2)}:\n            v = clip(v * self.twice)\n"
                          f"        return clip(v + self.base)\n"
                          f"{a} = clip({a} + {c}().apply({self.arr_expr(s)}))")

    def dict_in_insertion_order(self, s: _Scope, indent: int) -> None:
        """A dict whose keys are not in sorted order, read by position: a dict made here, or a
        new key of `D` (returned; JAX would give both back sorted)."""
        a = self.pick(s.arrays)
        if self.chance(0.5):
            d = self.new("od")
            self.emit(indent, f'{d} = {{"z": clip({self.arr_expr(s)}), "a": clip({self.arr(s)})}}\n'
                              f"{a} = clip({a} + list({d}.values())[0])")
        else:
            self.emit(indent, f'D["b"] = clip({self.arr_expr(s)})\n{a} = clip({a} + list(D.values())[-1])')

    def list_made_here_held_twice(self, s: _Scope, indent: int) -> None:
        """A list made here, held by a dict made here too, appended to through its name and read
        through the dict: in staged code every reference must see the item."""
        a, t, d = self.pick(s.arrays), self.new("mk"), self.new("md")
        made = self.pick([f"{t} = []\n{d} = {{'v': {t}}}", f"{d} = {{'v': []}}\n{t} = {d}['v']"])
        self.emit(indent, f"{made}\n{t}.append(clip({self.arr_expr(s)}))\n"
                          f"{a} = clip(sum({d}['v'], {a}) * len({d}['v']))")

    def in_place_change(self, s: _Scope, indent: int) -> None:
        """A list or dict from before changed in place by a method other than `append` (in a
        staged branch the change is carried and written back into the same object)."""
        a = self.pick(s.arrays)
        options = [f'D.update(a=clip({self.arr_expr(s)}))', f'{a} = clip({a} + D.setdefault("c", {self.arr(s)}))',
                   f"obj.cache.extend([clip({self.arr_expr(s)})])"]
        if "L" not in s.frozen:
            options += [f"L.extend([clip({self.arr_expr(s)}), {self.arr(s)}])", f"L.insert(0, clip({self.arr(s)}))",
                        "L.reverse()"]
        self.emit(indent, self.pick(options))

    def item_write(self, s: _Scope, indent: int) -> None:
        """An item written or deleted with a computed key (`L[i] = v`, a swap in a tuple target,
        `D[k] = v`, `del D[k]`, a slice): no name carries it, so in a staged branch its container
        is recorded and the change carried and written back (`jst.in_place(..., True)`)."""
        a, i, k = self.pick(s.arrays), self.new("ii"), self.new("kk")
        options = [f'{k} = "a"\nD[{k}] = clip({a} + D[{k}])',
                   f'{k} = "t"\nD[{k}] = clip({self.arr_expr(s)})\n{a} = clip({a} + D[{k}])\ndel D[{k}]']
        if "L" not in s.frozen:
            options += [f"if len(L) > 1:\n    {i} = len(L) - 1\n    L[{i}] = clip({self.arr_expr(s)})",
                        f"if len(L) > 1:\n    {i} = 0\n    L[{i}], L[{i} + 1] = L[{i} + 1], L[{i}]",
                        f"{i} = 1\nL[{i}:] = [clip({self.arr(s)})]"]
        if "xs" not in s.frozen:
            options += [f"{i} = len(xs) - 1\nxs[{i}] = clip(xs[{i}] + {self.arr(s)})"]
        if "P" not in s.frozen:
            options += [f"{i} = len(P) - 1\nP[{i}], P[0] = P[0], P[{i}]"]
        # Attributes changed by code no call announces: an in-place operator, a counting property
        options += [f"obj += clip({self.arr_expr(s)})", f"{a} = clip({a} + obj.seen)"]
        # Two names for one dict across an `if` that rebinds them: both (one object after
        # either side), or only one (its object decided by the data: refused where staged).
        q, e, c = self.new("qd"), self.new("ed"), self.cond(s)
        both = f"\n    {e} = {q}" if self.chance(0.5) else ""
        options += [f'{q} = {{"a": clip({a})}}\n{e} = {q}\nif {c}:\n    {q} = {{"a": clip({self.arr_expr(s)})}}'
                    f'{both}\n{e}["a"] = clip({e}["a"] + 1)\n{a} = clip({a} + {q}["a"] + {e}["a"])']
        self.emit(indent, self.pick(options))

    def aliased_append(self, s: _Scope, indent: int) -> None:
        """A list from before appended to through a name bound here (`al3 = obj.cache`): in a
        staged branch the list itself must grow, in a loop body too."""
        sources = ["log", "obj.cache"] + [name for name in ("L", "xs") if name not in s.frozen]
        t = self.new("al")
        self.emit(indent, f"{t} = {self.pick(sources)}\n{t}.append(clip({self.arr_expr(s)}))")

    def nested_def(self, s: _Scope, indent: int) -> None:
        h = self.new("h")
        if self.chance(0.3):
            k = self.pick(s.ints)
            self.emit(indent, f"def {h}():\n    nonlocal {k}\n    {k} = ({k} + 1) % {INT_MOD}\n    return {k}")
            self.emit(indent, f"{self.pick(s.arrays)} = clip({self.arr(s)} + {h}())")
            return
        self.emit(indent, f"def {h}(v, w={self.rng.randint(0, 3)}):")
        inner = s.child(arrays=["v"], in_function=True, loop_depth=0, scalar_reads=[], frozen=frozenset())
        self.emit(indent + 1, f"if {self.cond(inner)}:\n    v = clip(v + {self.arr(s)} * w)")  # closes over outer names
        self.emit(indent + 1, "return clip(v * 2 - w)")
        self.emit(indent, f"{self.pick(s.arrays)} = {h}({self.arr_expr(s)}){'' if self.chance(0.5) else ' + ' + h + '(' + self.arr(s) + ', 1)'}")

    def compound(self, s: _Scope, indent: int, depth: int) -> None:
        kind = self.rng.randint(0, 11)
        if kind <= 2:
            self.emit(indent, f"if {self.cond(s)}:")
            self.block(s, indent + 1, depth + 1)
            if self.chance(0.6):
                self.emit(indent, "else:")
                self.block(s, indent + 1, depth + 1)
        elif kind <= 6:
            self.for_loop(s, indent, depth)
        elif kind == 7:
            w = self.new("w")
            bound = self.pick(["3", "n", "len(P) % 4", "2"])
            extra = f" and {self.cond(s, 1)}" if self.chance(0.4) else ""
            self.emit(indent, f"{w} = 0\nwhile {w} < {bound}{extra}:\n    {w} += 1")
            self.loop_body(s.child(int_reads=s.int_reads + [w], loop_depth=s.loop_depth + 1), indent + 1, depth)
        elif kind == 8:
            self.emit(indent, "try:")
            self.block(s, indent + 1, depth + 1)
            self.emit(indent, f"finally:\n    log.append({self.rng.randint(10, 20)})")
        elif kind == 9:
            self.emit(indent, f"with Ctx(log, {self.rng.randint(1, 9)}) as c:")
            if self.chance(0.4):  # `Ctx` holds `log` while a loop (maybe a scan) appends to it
                self.for_loop(s, indent + 1, depth + 1)
            self.block(s, indent + 1, depth + 1)
        elif kind == 10:
            self.iterator(s, indent, depth)
        else:
            self.logged_scan(s, indent, depth)

    def logged_scan(self, s: _Scope, indent: int, depth: int) -> None:
        """A loop that a scan may run (a static range, an array carried) appending arrays to
        `log`, which a `Ctx` also holds (its exit appends through its own reference), maybe
        inside a staged `if`, maybe appending through `c.log` too."""
        a, i = self.pick(s.arrays), self.new("i")
        self.emit(indent, f"with Ctx(log, {self.rng.randint(1, 9)}) as c:")
        inner = indent + 1
        if self.chance(0.3):
            self.emit(inner, f"if {self.cond(s)}:")
            inner += 1
        bound = self.pick(['3', '4', 'n'])
        self.emit(inner, f"for {i} in range({bound}):")
        self.emit(inner + 1, f"{a} = clip({a} + {self.arr(s)} * 0.5)")
        self.emit(inner + 1, f"log.append(clip({a} * {self.pick(['1', '2', i])}))")
        if self.chance(0.3):
            self.emit(inner + 1, f"c.log.append(clip({a} - 1))")
        if self.chance(0.3):
            self.block(s.child(loop_depth=s.loop_depth + 1, int_reads=s.int_reads + [i]), inner + 1, depth + 1, 1)
        if inner > indent + 1:
            self.emit(inner - 1, "else:")
            self.emit(inner, f"for {i} in range({bound}):\n    log.append(clip({self.arr(s)}))")

    def for_loop(self, s: _Scope, indent: int, depth: int) -> None:
        i = self.new("i")
        kind = self.rng.randint(0, 7)
        child = s.child(loop_depth=s.loop_depth + 1)
        if kind <= 2:
            self.emit(indent, f"for {i} in range({self.pick(['3', 'n', '2', 'n', 'len(xs)'])}):")
            child = child.child(int_reads=s.int_reads + [i])
        elif kind == 3:
            v = self.new("v")
            self.emit(indent, f"for {v} in {self.pick(['L', 'L[-3:]', 'list(L)', 'xs[:]'])}:")
            child = child.child(arrays=s.arrays + [v], frozen=s.frozen | {"L", "xs"})
        elif kind == 4:
            v = self.new("v")
            self.emit(indent, f"for {i}, {v} in enumerate({self.pick(['L', 'P', 'xs'])}):")
            is_p = self.lines[-1].endswith("(P):")
            child = child.child(int_reads=s.int_reads + [i] + ([v] if is_p else []),
                                arrays=s.arrays + ([] if is_p else [v]), frozen=s.frozen | {"L", "xs", "P"})
        elif kind == 5:
            u, v = self.new("u"), self.new("v")
            self.emit(indent, f"for {u}, {v} in zip(L, {self.pick(['xs', 'L[1:]', 'reversed(xs)'])}):")
            child = child.child(arrays=s.arrays + [u, v], frozen=s.frozen | {"L", "xs"})
        elif kind == 6:
            v = self.new("v")
            self.emit(indent, f"for {v} in reversed({self.pick(['L', 'range(n)', 'P'])}):")
            src = self.lines[-1]
            if "L)" in src:
                child = child.child(arrays=s.arrays + [v], frozen=s.frozen | {"L"})
            else:
                child = child.child(int_reads=s.int_reads + [v], frozen=s.frozen | {"P"})
        else:
            e = self.new("e")
            self.emit(indent, f"for {e} in {self.arr(s)}:")  # the elements of an array: static trip count
            child = child.child(scalar_reads=s.scalar_reads + [e])
        self.loop_body(child, indent + 1, depth)
        if self.chance(0.2):
            self.emit(indent, "else:\n    log.append(99)")

    def loop_body(self, s: _Scope, indent: int, depth: int) -> None:
        if self.chance(0.3):  # a variable first set here, read after the loop (which may run zero times)
            t = self.new("t")
            self.emit(indent, f"{t} = clip({self.arr_expr(s)})")
            self.late.append(t)
        if self.chance(0.2):
            self.emit(indent, f"FN.append(lambda v: clip(v + {self.pick(s.int_reads or ['1'])}))")  # late binding
        if self.chance(0.2):  # stacked by a scan; `log` is also a `Ctx`'s
            self.emit(indent, f"log.append(clip({self.arr_expr(s)}))")
        self.block(s, indent, depth + 1)
        if self.chance(0.45):
            self.emit(indent, f"if {self.cond(s)}:\n    {self.pick(['break', 'continue'])}")
            if self.chance(0.5):
                self.block(s, indent, depth + 1, 1)
        if self.chance(0.15):
            self.emit(indent, f"try:\n    if {self.cond(s)}:\n        {self.pick(['break', 'continue'])}\n"
                              f"    {self.pick(s.arrays)} = clip({self.arr(s)} + 1)\nfinally:\n    log.append(7)")

    def iterator(self, s: _Scope, indent: int, depth: int) -> None:
        it, v = self.new("it"), self.new("v")
        self.emit(indent, f"{it} = iter({self.pick(['L', 'xs', 'L[::-1]'])})")
        loop_indent = indent
        if self.chance(0.25):  # the loop inside a staged side: it moves the iterator only where the data goes
            self.emit(indent, f"if {self.cond(s)}:")
            loop_indent += 1
        self.emit(loop_indent, f"for {v} in {it}:")
        a = self.pick(s.arrays)
        stop = self.cond(s.child(arrays=s.arrays + [v])) if self.chance(0.5) else f"len(log) {self.pick(['<', '>='])} 1"
        self.emit(loop_indent + 1, f"{a} = clip({a} + {v})\nif {stop}:\n    break")
        if self.chance(0.3):  # the rest from where the traced break stopped
            w = self.new("w")
            self.emit(indent, f"for {w} in {it}:")
            self.emit(indent + 1, f"{a} = clip({a} * 0.5 + {w})")
            if self.chance(0.5):
                self.emit(indent + 1, f"if {self.cond(s.child(arrays=s.arrays + [w]))}:\n    break")
        if self.chance(0.3):  # a staged side takes an item: the position moves only where the data goes
            self.emit(indent, f"if {self.cond(s)}:\n    {a} = clip({a} + next({it}, {self.arr(s)}))")
        if self.chance(0.1):  # read as Python: the items left, wherever the data left the iterator
            self.emit(indent, f"log.append(len({self.pick(['list', 'tuple'])}({it})))")
        if self.chance(0.7):
            self.emit(indent, f"{a} = clip({a} + next({it}, {self.arr(s)}))")
        else:
            self.emit(indent, f"{a} = clip({a} + next({it}))")  # may raise StopIteration
        if self.chance(0.2):  # Python numbers: next() gives the numbers rule's weak scalar
            k, n = self.new("it"), self.new("n")
            self.emit(indent, f"{k} = iter(P)\nfor {n} in {k}:\n    {a} = clip({a} + {n})\n"
                              f"    if {self.cond(s)}:\n        break\n{a} = clip({a} + next({k}, 0))")


def draw_models_kind(seed: int, kind: str) -> RealProgram:
    """A small program made of f's first block, one statement of the models stream's class
    `kind` (`MODELS_KINDS`, `MODELS_LATE_KINDS`, `MODELS_LAST_KINDS`) at f's top level, drawn from `models-kind-<seed>`,
    and f's return: each class alone, for tests that check what to_static must do with it."""
    rng = random.Random(f"models-kind-{seed}")
    quiet = [random.Random(0) for _ in range(5)]
    g = _Generator(*quiet, models=rng)
    g.rng = rng
    scope = _Scope(arrays=["a0", "a1"], ints=["k0", "k1"], int_reads=[], scalar_reads=[])
    g.emit(1, "a0 = x\na1 = clip(y * 2)\nk0 = 1\nk1 = len(xs)\nL = [x, y]\nP = [3, 1, 2]\n"
              'D = {"a": x, "k": 1}\nDD = D\nFN = []\nlog = []')
    g.models_statement(scope, 1, only=kind)
    for line in g.mq_tail + g.ml_tail:
        g.emit(1, line)
    g.emit(1, "out = [fn(a0) for fn in FN]")
    g.emit(1, g.return_text())
    source = PRELUDE + g.module_header() + "\n" + g.signature() + "\n" + "\n".join(g.lines) + "\n"
    values = rng.sample(range(-3, 6), 6)
    xs = [np.array(rng.sample(range(-3, 6), 3), np.float32) for _ in range(rng.randint(1, 3))]
    return RealProgram(seed, source, np.array(values[:3], np.float32), np.array(values[3:], np.float32),
                       rng.choice([0, 1, 3]), rng.random() < 0.5, xs)


def draw_program(seed: int, calls_stream: bool = True, lazy_stream: bool = True,
                 models_stream: bool = True, models_late_stream: bool = True,
                 models_last_stream: bool = True) -> RealProgram:
    """The program and inputs that `seed` names (without `calls_stream`, `lazy_stream`,
    `models_stream`, `models_late_stream` or `models_last_stream`: as before that stream was added,
    the other streams' draws being the same either way)."""
    rng = random.Random(seed)
    boundary = random.Random(f"boundary-{seed}")
    effects = random.Random(f"effects-{seed}")
    calls = random.Random(f"calls-{seed}")
    g = _Generator(rng, random.Random(f"extra-{seed}"), random.Random(f"later-{seed}"),
                   random.Random(f"mangled-{seed}"), random.Random(f"classes-{seed}"), boundary,
                   random.Random(f"numbers-{seed}"), effects, random.Random(f"items-{seed}"), calls,
                   random.Random(f"flags-{seed}"), random.Random(f"libs-{seed}"),
                   random.Random(f"lazy-{seed}") if lazy_stream else None,
                   random.Random(f"models-{seed}") if models_stream else None,
                   random.Random(f"models-more-{seed}") if models_stream else None,
                   random.Random(f"models-late-{seed}") if models_late_stream else None,
                   random.Random(f"models-last-{seed}") if models_last_stream else None)
    g.draw_features()
    g.draw_effects()
    if calls_stream:
        g.draw_calls()
    scope = _Scope(arrays=["a0", "a1"], ints=["k0", "k1"], int_reads=[], scalar_reads=[])
    g.emit(1, "a0 = x\na1 = clip(y * 2)\nk0 = 1\nk1 = len(xs)\nL = [x, y]\nP = [3, 1, 2]\n"
              'D = {"a": x, "k": 1}\nDD = D\nFN = []\nlog = []')
    if g.prologue():
        g.emit(1, g.prologue())
    if g.effects_prologue():
        g.emit(1, g.effects_prologue())
    while g.budget > 0:
        g.statement(scope, 1, 0)
    main = g.rng
    g.rng = boundary
    for name in BOUNDARY_FEATURES:  # one statement of each class drawn that none shows yet
        if name in g.features and name not in g.shown:
            g.boundary_statement(scope, 1, only=name)
    g.rng = effects
    ending = "while_true" in g.effect_features and effects.random() < 0.35  # (f's end: refused more often)
    for name in EFFECT_FEATURES:  # the same for the effects stream
        if name in g.effect_features and name not in g.effect_shown and not (name == "while_true" and ending):
            g.effects_statement(scope, 1, only=name)
    g.rng = calls
    at_end = "py_raise" in g.call_features and calls.random() < 0.5  # the raise just before f returns
    for name in CALL_FEATURES:  # the same for the calls stream
        if name in g.call_features and name not in g.call_shown and not (name == "py_raise" and at_end):
            g.calls_statement(scope, 1, only=name)
    g.rng = main
    for line in g.tail + g.mq_tail + g.ml_tail:
        g.emit(1, line)
    if at_end:
        g.rng = calls
        g.python_raise(scope, 1, at_end=True)
        g.rng = main
    g.emit(1, "out = [fn(a0) for fn in FN]")
    if ending:
        g.rng = effects
        g.while_true_ending(scope)
        g.rng = main
    else:
        g.emit(1, g.return_text())
    source = PRELUDE + g.module_header() + "\n" + g.signature() + "\n" + "\n".join(g.lines) + "\n"
    values = rng.sample(range(-3, 6), 6)
    x = np.array(values[:3], np.float32)
    y = np.array(values[3:], np.float32)
    for token, expr, call in g.thresholds:  # `expr + ROUND * 2 > c` from call `call` on
        source = source.replace(token, str(int(THRESHOLD_EXPRS[expr](x, y)) + 2 * call - 1))
    xs = [np.array(rng.sample(range(-3, 6), 3), np.float32) for _ in range(rng.randint(1, 3))]
    n, n_as_array = rng.choice([0, 1, 3]), rng.random() < 0.5
    s_values = n_values = ()
    if "scalar" in g.features:
        s_values = boundary.choice([(1, 1.0, True), (True, 1, 1.0), (1.0, True, 1), (2, 2.0, 2), (0, False, 0.0)])
        if n == 1 and not n_as_array and boundary.random() < 0.5:
            n_values = boundary.choice([(1, True, 1), (True, 1, True)])
    return RealProgram(seed, source, x, y, n if not n_values else n_values[0], n_as_array, xs, s_values, n_values)

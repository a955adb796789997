"""The one per-thread record of what is being traced now: the programs, the staged sides and
loop bodies inside them, and what each runtime operator needs to know about them.

Runtime operators read and push onto `CONTEXT` instead of keeping thread-locals of their own,
so "the current trace or side" has one meaning and one place. Innermost entries are last.
A leaf module: it imports nothing of dy2st, and every part of the runtime may import it.
"""

import threading


class _TraceContext(threading.local):
    """Per thread; each field is initialised on the thread's first read (`threading.local`)."""

    def __init__(self):
        # the `writes._Program` of each program being traced
        self.programs: list = []
        # a token per staged side or loop body being traced (`staging.staged_tracing`)
        self.sides: list = []
        # the `writes.WriteTracker` of each side being traced
        self.trackers: list = []
        # `(origin, what)` of each staged ternary or `and`/`or` side being traced
        # (`staging.refusing_in_place`)
        self.in_place_refusals: list = []
        # lists grown in place / watched while tracing staged code; emptied with the last side
        # (`staging.note_grown`, `staging.watch_here`)
        self.grown_lists: dict = {}
        self.watched_lists: dict = {}
        # how many loop bodies being traced now are traced again once typed: a variable first
        # set in the loop has no type yet (`loop_staging._build`), so a side that raises there
        # is deferred even in the user's own jit (`staging._run_branch_noting`)
        self.untyped_loops: int = 0
        # how many static `range` loops are being tried as scans now (`loops._try_stage_range`)
        self.trial_scans: int = 0
        # `(id(frame), line)` -> count of the `with` statements running now whose manager never
        # suppresses an exception (`calls.managed`): no handler for `staging.handler_around`
        self.unsuppressing: dict = {}
        # the `loops.LoopOptions` of each loop whose body runs now
        self.loop_options: list = []
        # how many enclosing loop or branch traces are under reverse-mode AD (`ad_context`)
        self.reverse_depth: int = 0
        # the `events.Recording` open now, or None
        self.recording = None
        # id -> `writes.HeldPosition` of the iterators staged code took over, id -> the iterators
        # `iter()` made, and how many converted runs, whose end drops both records, are open
        # (`writes.converted_run`)
        self.held_positions: dict = {}
        self.new_iterators: dict = {}
        self.converted_runs: int = 0
        # refusals made in the outermost converted run outside any program (a converted function
        # inline in the user's jit), which user code may catch (`writes.note_refusal`)
        self.inline_refusals: list = []
        # the levels of code being traced whose numbers-rule checks are made before each ordered
        # effect (`asserts.numbers_checked`), and whether those checks are being staged now
        self.number_levels: list = []
        self.checking_numbers: bool = False
        # the `values.PythonNumbers` of the outermost converted run open now, or None
        self.python_numbers = None
        # the GuardSet of a converted function run inline outside any program (`guards.recorded_inline`)
        self.inline_guards = None
        # values of globals written outside any program trace (`checks.remember_global`)
        self.remembered_globals: dict = {}
        # program traces that gave a program so far, and what puts back the last one's changes
        # outside the call, or None (`program_body.changes_lost_with`)
        self.programs_traced: int = 0
        self.put_back_last_trace = None


CONTEXT = _TraceContext()

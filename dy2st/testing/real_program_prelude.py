"""What every program of the real-program fuzzer starts with (its source is the prelude the
generator writes at the top of each program), importable by tests that need the same objects.
"""

import dataclasses
import weakref

import jax
import jax.numpy as jnp


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Acc:
    """A registered pytree object a State holds and programs change in place."""

    w: jax.Array


_FIRST_ACC: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class Base:
    """What State extends: a method its own calls through `super()`."""

    def climb(self, v):
        return jnp.clip(v + 1, -1000, 1000)


class State(Base):
    """A small stateful object, as models and trainers have."""

    rate = 1  # a class attribute a program reads through `obj` and `_change()` sets between calls

    def __init__(self):
        self.count = 0
        self.cache = []
        self.h = jnp.zeros(3, jnp.float32)
        self.acc = Acc(jnp.ones(3, jnp.float32))
        self.__m = jnp.zeros(3, jnp.float32)  # `_State__m` once compiled (`shift`)
        _FIRST_ACC[self] = self.acc  # kept out of the state, so that programs do not see it

    def acc_is_first(self):
        """Whether `acc` is still the object this State was made with."""
        return self.acc is _FIRST_ACC.get(self)

    def bump(self, v):
        self.count += 1
        self.h = jnp.clip(self.h + v, -1000, 1000)
        return self.count

    @property
    def seen(self):
        """A property with an effect: counts its reads (code run as it is, that no call of the
        user's announces: a staged side records `obj` before it runs)."""
        self.count += 1
        return self.h

    def __iadd__(self, v):
        """`obj += v`: Python calls this itself, not through a converted call."""
        self.h = jnp.clip(self.h + v, -1000, 1000)
        return self

    def remember(self, v):
        self.cache.append(v)
        return len(self.cache)

    def total(self):
        return self.h.sum() + self.count

    def climb(self, v):
        """A zero-argument `super()` in an `if` and a loop (staged when `v` is traced)."""
        if v.sum() > 0:
            v = super().climb(v) * 2
        for _ in range(2):
            v = super().climb(v)
        return v

    def shift(self, v):
        """Private names, which the compiler mangles in a class body (`self._State__m`, a local
        `_State__k`), written in an `if` and a loop of a method: staged when `v` is traced."""
        __k = 1
        if v.sum() > 0:
            self.__m = jnp.clip(self.__m + v, -1000, 1000)
            __k = 2
        for _ in range(2):
            self.__m = jnp.clip(self.__m - 1, -1000, 1000)
        return __k


class Ctx:
    """A context manager that logs its entry and exit."""

    def __init__(self, log, tag):
        self.log = log
        self.tag = tag

    def __enter__(self):
        self.log.append(self.tag)
        return self

    def __exit__(self, *exc_info):
        self.log.append(-self.tag)
        return False


def clip(v):
    return jnp.clip(v, -1000, 1000)

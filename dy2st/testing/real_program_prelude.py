"""What every program of the real-program fuzzer starts with (its source is the prelude the
generator writes at the top of each program), importable by tests that need the same objects.
"""

import jax.numpy as jnp


class State:
    """A small stateful object, as models and trainers have."""

    def __init__(self):
        self.count = 0
        self.cache = []
        self.h = jnp.zeros(3, jnp.float32)

    def bump(self, v):
        self.count += 1
        self.h = jnp.clip(self.h + v, -1000, 1000)
        return self.count

    def remember(self, v):
        self.cache.append(v)
        return len(self.cache)

    def total(self):
        return self.h.sum() + self.count


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

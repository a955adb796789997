"""Functions explained by tests/explain: each has the construct its test names on a known line
(the tests find lines by the text on them, so editing this file keeps them true)."""

import jax
import jax.numpy as jnp

import dy2st


def everything(x, n):
    y = x
    if x.sum() > 0:  # traced if
        y = x * 2
    else:
        y = x - 1
    if n > 2:  # python if
        y = y + 1
    for i in range(3):  # static range scan
        y = y * 0.5 + i
    acc = []
    for i in range(n):  # range that grows a list
        acc.append(y * i)
    while y.sum() < 100:  # traced while
        y = y * 2
    k = 0
    while k < 2:  # python while
        k += 1
    y = helper(y)  # converted call
    y = not_converted(y)  # python call
    print(y)  # traced print
    assert y.sum() > -5  # traced assert
    z = y if y[0] > 0 else -y  # traced ternary
    return z, acc


def helper(v):
    if v.sum() > 0:  # helper's if
        return v * 2
    return v


@dy2st.not_to_static
def not_converted(v):
    return v + 1


def search(x):
    for i in range(4):  # search loop
        if x[i] > 2:  # search test
            return x[i]
        x = x + 1
    return x.sum()


def nested(x):
    total = 0.0
    for i in range(3):  # outer loop
        j = 0
        while x[j] < 5.0:  # inner while
            x = x.at[j].add(1.0)
            if j < 2:  # inner if
                j += 1
        total = total + x.sum()
    return total


def scan_or_unroll(x):
    for i in range(3):  # scanned range
        x = x + i
    outs = []
    for i in range(3):  # unrolled range
        outs.append(x[i] * 2)
        x = x[: 3 - i]
    return x, outs


def bounded(x):
    while x.sum() < 10:  # bounded while
        dy2st.set_loop_options(maximum_iterations=20)
        x = x + 1
    return x


def zero_trip(x, n):
    i = 0
    while i < n:  # zero-trip loop
        last = x * i
        i = i + 1
    return last  # read after the loop


def fact(n, x):
    if n == 0:  # base case
        return x
    return fact(n - 1, x * n)  # recursive call


def refused(x):
    ys = []
    if x.sum() > 0:  # refused if
        ys.append(x)
    return ys


class Counter:
    def __init__(self):
        self.w = jnp.ones(3)
        self.steps = jnp.zeros((), jnp.int32)

    def __call__(self, x):
        for _ in range(2):  # model loop
            if x.sum() > 0:  # model if
                x = x * self.w
            self.steps = self.steps + 1
        return x


def grad_of_nested(x):
    def loss(v):
        if v.sum() > 0:  # nested if
            return (v**2).sum()
        return v.sum()

    return jax.grad(loss)(x)  # grad call


class Decorated:
    def __init__(self):
        self.w = jnp.ones(3)

    @dy2st.to_static
    def __call__(self, x):
        if x.sum() > 0:  # decorated if
            return x * self.w
        return x


def calls_decorated(x, model):
    return model(x) * 2  # decorated call


def line_of(marker: str) -> int:
    """The line of this file whose text contains `# marker`."""
    with open(__file__) as f:
        for number, text in enumerate(f, start=1):
            if text.rstrip().endswith(f"# {marker}"):
                return number
    raise LookupError(marker)

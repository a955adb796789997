"""One StaticFunction called from 8 threads at once with a mix of shapes: every signature is
traced once, every call returns the eager result, and the caches stay consistent."""

import threading

import jax.numpy as jnp
import numpy as np

import dy2st
from dy2st import conversion

N_THREADS = 8
SHAPES = [(3,), (4,), (5,), (2, 3)]


def _run_threads(target, n=N_THREADS):
    barrier = threading.Barrier(n)
    errors = []

    def worker(i):
        try:
            barrier.wait()
            target(i)
        except BaseException as e:  # collected and re-raised in the main thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def test_each_signature_compiles_once_and_every_result_is_right():
    def f(x, scale):
        if x.sum() > 0:
            y = x * scale
        else:
            y = x - scale
        return y

    g = dy2st.to_static(f)
    results, used = [], set()
    lock = threading.Lock()

    def work(i):
        for j in range(12):
            shape = SHAPES[(i + j) % len(SHAPES)]
            sign = 1.0 if (i + j) % 3 else -1.0
            x = sign * jnp.arange(1, 1 + int(np.prod(shape)), dtype=jnp.float32).reshape(shape)
            scale = 2.0 if j % 2 else 3.0
            keyword = j % 4 == 0
            out = g(x, scale=scale) if keyword else g(x, scale)
            with lock:
                used.add((shape, scale, keyword))
            xn = np.asarray(x)
            results.append((np.asarray(out), xn * scale if xn.sum() > 0 else xn - scale))

    _run_threads(work)
    assert len(results) == N_THREADS * 12
    for got, expected in results:
        np.testing.assert_allclose(got, expected)
    # a keyword call binds as a positional one (one program for both); each traced exactly once
    signatures = {(shape, scale) for shape, scale, _ in used}
    assert len(g.programs) == len(signatures)
    assert sorted((p.signature.avals[0].shape, p.signature.static_key[1][0]) for p in g.programs) == sorted(signatures)
    assert g._cache.traced == len(signatures)


def test_positional_arrays_hit_path_from_many_threads():
    def f(x):
        return x * 2 if x.sum() > 0 else x - 1

    g = dy2st.to_static(f)
    outs = []

    def work(i):
        for j in range(40):
            x = jnp.full(SHAPES[(i * 7 + j) % len(SHAPES)], 1.0 if j % 2 else -1.0, jnp.float32)
            outs.append((np.asarray(g(x)), np.where(np.asarray(x).sum() > 0, np.asarray(x) * 2, np.asarray(x) - 1)))

    _run_threads(work)
    for got, expected in outs:
        np.testing.assert_allclose(got, expected)
    assert g._cache.traced == len(SHAPES)
    assert len(g.programs) == len(SHAPES)


def test_threads_sharing_a_small_bounded_cache():
    def f(x):
        return x + 1 if x.sum() > 0 else x - 1

    g = dy2st.to_static(f, max_programs=2)
    outs = []

    def work(i):
        for j in range(15):
            x = jnp.ones(SHAPES[(i + j) % len(SHAPES)], jnp.float32)
            outs.append(np.asarray(g(x)))
            assert len(g.programs) <= 2

    _run_threads(work)
    for out in outs:
        np.testing.assert_allclose(out, 2.0)
    assert len(g.programs) <= 2 and len(g._cache.table) == len(g.programs)


def test_conversion_cache_from_many_threads():
    def f(x):
        if x.sum() > 0:
            return x * 2
        return x

    conversion.clear_cache()
    functions = [dy2st.to_static(f) for _ in range(N_THREADS)]
    codes = []

    def work(i):
        functions[i](jnp.ones(3))
        codes.append(functions[i].code)

    _run_threads(work)
    assert len(set(codes)) == 1
    assert len(conversion._cache) == 1

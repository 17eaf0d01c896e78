"""The fast track's threads: how many row blocks its kernels use, and that npformer never
changes the process's BLAS threads (a program's decision, ``runtime.cores``)."""
import threading

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

import npformer
from npformer.fast.parallel import available_cores, blas_threads, blocks, cores, on_cores, use_cores
from npformer.runtime.cores import limit_blas_threads


def blas_counts():
    return sorted(p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas")


def test_with_blas_on_one_thread_the_fast_kernels_use_every_available_core():
    with threadpool_limits(1, user_api="blas"):
        assert blas_threads() == 1
        assert cores() == available_cores()
        with on_cores(1):
            assert cores() == 1


def test_while_blas_has_threads_of_its_own_the_fast_kernels_leave_the_cores_to_it():
    with threadpool_limits(2, user_api="blas"):
        if blas_threads() < 2:
            pytest.skip("this BLAS cannot run two threads here")
        with on_cores(2):
            assert cores() == 1
        with on_cores(2, beside_blas=True):
            assert cores() == 2


def test_blocks_cover_every_row_once_in_order():
    with on_cores(3, min_work=1, beside_blas=True):
        for n_rows in range(0, 8):
            parts = blocks(n_rows)
            covered = [i for part in parts for i in range(n_rows)[part]]
            assert covered == list(range(n_rows)) and len(parts) == max(1, min(3, n_rows))
    with on_cores(3, min_work=10, beside_blas=True):
        assert len(blocks(4, row_work=5)) == 2                  # 20 elements: two blocks of 10


def test_limit_blas_threads_pins_blas_inside_the_block_only():
    before = blas_counts()
    with limit_blas_threads(2):
        assert set(blas_counts()) == {1}
        assert cores() == min(2, available_cores()) or cores() == 2
    assert blas_counts() == before
    with limit_blas_threads(0):
        assert blas_counts() == before


def test_the_fast_track_changes_no_process_setting():
    before = blas_counts()
    model = npformer.DecoderLM(npformer.DecoderConfig.gpt2(vocab_size=11, d_model=16, n_heads=2,
                                                           n_layers=1), np.random.default_rng(0))
    ids = np.random.default_rng(1).integers(0, 11, (2, 5))
    with npformer.track("fast"):
        logits, cache = model.forward(ids)
        model.backward(npformer.cross_entropy(logits, ids)[1], cache)
    assert blas_counts() == before


def test_a_core_setting_in_one_thread_leaves_the_others_alone():
    seen = {}
    inside, leave = threading.Event(), threading.Event()

    def other():
        with on_cores(3, min_work=1, beside_blas=True):
            seen["other"] = len(blocks(9))
            inside.set()
            leave.wait(10)

    thread = threading.Thread(target=other)
    thread.start()
    inside.wait(10)
    seen["main"] = len(blocks(9))                     # the default: 1 << 17 elements per block
    leave.set()
    thread.join()
    assert seen == {"other": 3, "main": 1}


def test_use_cores_checks_its_arguments_and_returns_the_previous_count():
    with pytest.raises(ValueError, match=r"n: expected a positive integer or None, got 0"):
        use_cores(0)
    with pytest.raises(ValueError, match=r"min_work: expected a positive integer, got True"):
        use_cores(2, min_work=True)
    with on_cores(4):
        assert use_cores(None) == 4

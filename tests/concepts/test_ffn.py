"""The feed-forward layers (t07_ffn.py): the finite-difference checks of its gradient cases."""
import pytest

from support.gradients import check_gradients, gradient_checks


@pytest.mark.parametrize("name, size, track", gradient_checks("t07_ffn.py"))
def test_gradient_check(name, size, track):
    check_gradients(name, size, track)

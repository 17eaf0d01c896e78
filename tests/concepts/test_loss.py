"""Logits to loss: log-softmax and cross-entropy (t11_loss.py): the finite-difference checks of its gradient cases."""
import pytest

from support.gradients import check_gradients, gradient_checks


@pytest.mark.parametrize("name, size, track", gradient_checks("t11_loss.py"))
def test_gradient_check(name, size, track):
    check_gradients(name, size, track)

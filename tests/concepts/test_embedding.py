"""Token embeddings and positions (t01_embedding.py): the finite-difference checks of its gradient cases."""
import pytest

from support.gradients import check_gradients, gradient_checks


@pytest.mark.parametrize("name, size, track", gradient_checks("t01_embedding.py"))
def test_gradient_check(name, size, track):
    check_gradients(name, size, track)

# exercise: attention
# function: t04_attention.py:may_read
# slip: the window lets a query read window + 1 keys
def may_read(query_pos, key_pos, window=None):
    """The causal rule: a query at ``query_pos`` may read a key at ``key_pos`` at or before it,
    and with a ``window`` only the ``window`` most recent ones (itself included).

    The positions broadcast against each other (e.g. [n, 1] and [1, m] give an [n, m] table).
    """
    allowed = key_pos <= query_pos
    if window is not None:
        allowed = allowed & (key_pos >= query_pos - window)
    return allowed

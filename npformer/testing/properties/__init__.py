"""The facts each component must satisfy, as checks you can run on your own implementation.

Every property is a function ``check(subject, example)`` (see ``registry``): ``subject`` runs
the implementation (``npformer.testing.Subject``), ``example`` is an input drawn by
``npformer.testing.strategies`` (None for the properties on fixed numbers). ``of(name)``
lists a component's properties; ``conform`` checks them all.

    from npformer.testing import Subject, properties, strategies
    subject = Subject("attention", my_attention_forward, my_attention_backward)

    @given(strategies.attention_inputs())
    def test_masked_keys_change_nothing(example):
        properties.attention_ignores_unreadable_keys(subject, example)
"""
from .attention import (attention_by_hand, attention_ignores_unreadable_keys,  # noqa: F401
                        attention_of_nothing_is_zero, attention_unread_keys_get_no_gradient,
                        decoding_never_reads_ahead, grouped_attention_sums_the_group,
                        multi_head_attention_is_causal, multi_head_attention_is_permutation_equivariant,
                        rope_backward_is_a_rotation, rope_keeps_lengths, rope_scores_depend_on_the_offset,
                        rope_turns_by_the_angle)
from .elementwise import (activation_slopes, adamw_corrects_the_bias_at_step_two,  # noqa: F401
                          adamw_decay_is_decoupled, adamw_first_step_is_about_lr,
                          cross_entropy_ignored_targets_get_no_gradient, cross_entropy_is_a_mean,
                          cross_entropy_of_uniform_logits, embedding_rows_collect_their_reads,
                          gelu_at_one, linear_bias_gradient_is_a_sum,
                          linear_weight_gradient_adds_over_the_batch,
                          log_softmax_gradient_rows_sum_to_zero, log_softmax_probabilities_sum_to_one,
                          relu_gates_the_gradient, silu_at_one, softmax_does_not_overflow,
                          softmax_gradient_rows_sum_to_zero, softmax_ignores_a_shift,
                          softmax_masked_scores_get_no_gradient, softmax_masked_weights_are_zero,
                          softmax_of_the_tutorials_scores, softmax_rows_sum_to_one)
from .norms import (layernorm_gradient_is_blind_to_scale_and_shift,  # noqa: F401
                    layernorm_ignores_scale_and_shift, layernorm_standardises,
                    rmsnorm_gives_unit_rms, rmsnorm_gradient_is_blind_to_scale, rmsnorm_ignores_scale,
                    swiglu_is_position_wise)
from .registry import PROPERTIES, Property, PropertyFailed, close, of, zero  # noqa: F401

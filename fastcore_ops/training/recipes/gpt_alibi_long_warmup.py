"""gpt_alibi with the sequence length growing over 60% of the run instead of 30%.

The warmup's short sequences are its cheap steps: attention costs grow with the length, and
with as many tokens in each step, a step at 64 tokens does a quarter of a full-length step's
attention work. Twice the duration spends about twice as many steps short, trading some of
the context the model sees early for time; ALiBi is what lets those short steps still serve
the full length L. Everything else is gpt_alibi's, so the difference measures the schedule.
"""

from fastcore_ops.training.recipes import Derived

RECIPE = Derived("gpt_alibi", {"methods.seq_length_warmup.duration": 0.6})

"""The token data of language-model training, one job per module.

- ``corpus``: which files a corpus holds (a folder of text, or the Python standard library's
  source) and which of them are validation;
- ``tokenizers``: text to token ids, every byte a token (``bytes``) or a byte-level BPE (``bpe``);
- ``prepare``: tokenize once into memory-mappable ``train.bin``/``validation.bin`` with a
  ``meta.json`` (``python -m fastcore_ops.training.text.prepare``), cached by ``prepared_tokens``;
- ``loader``: the batches the trainer iterates, ``TokenWindows`` to train, ``TokenEvaluation``
  to evaluate.

Import from the modules (``from fastcore_ops.training.text.tokens import prepared_tokens``): this file
imports none of them, so ``python -m fastcore_ops.training.text.prepare`` does not load its module twice.
"""

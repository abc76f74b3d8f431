"""HF tokenizers' TestTokenizer.test_encode_formats and test_encode_add_special_tokens, against fstok.Tokenizer.

Adapted from bindings/python/tests/bindings/test_tokenizer.py (see PROVENANCE.md): `BertWordPieceTokenizer(vocab)`
and `Tokenizer(BPE(vocab, merges))` are built by HF from local files and run by fstok (utils.as_fstok); the
inputs and expected outputs are upstream's.
"""
import numpy as np
import pytest

from .utils import as_fstok, bert_tokenizer, roberta_files


def test_encode_formats():
    tokenizer = bert_tokenizer()

    # Encode
    output = tokenizer.encode("my name is john")
    assert output.tokens == ["[CLS]", "my", "name", "is", "john", "[SEP]"]
    output = tokenizer.encode("my name is john", "pair")
    assert output.tokens == ["[CLS]", "my", "name", "is", "john", "[SEP]", "pair", "[SEP]"]
    output = tokenizer.encode(["my", "name", "is", "john"], is_pretokenized=True)
    assert output.tokens == ["[CLS]", "my", "name", "is", "john", "[SEP]"]
    output = tokenizer.encode(["my", "name", "is", "john"], ["pair"], is_pretokenized=True)
    assert output.tokens == ["[CLS]", "my", "name", "is", "john", "[SEP]", "pair", "[SEP]"]

    result_single = [
        ["[CLS]", "my", "name", "is", "john", "[SEP]"],
        ["[CLS]", "my", "name", "is", "georges", "[SEP]"],
    ]
    result_pair = [
        ["[CLS]", "my", "name", "is", "john", "[SEP]", "pair", "[SEP]"],
        ["[CLS]", "my", "name", "is", "georges", "[SEP]", "pair", "[SEP]"],
    ]

    def format(encodings):
        return [e.tokens for e in encodings]

    def test_single(input, is_pretokenized=False):
        output = tokenizer.encode_batch(input, is_pretokenized=is_pretokenized)
        assert format(output) == result_single

    def test_pair(input, is_pretokenized=False):
        output = tokenizer.encode_batch(input, is_pretokenized=is_pretokenized)
        assert format(output) == result_pair

    test_single(["My name is John", "My name is Georges"])
    test_pair([("my name is john", "pair"), ("my name is georges", "pair")])
    test_pair([["my name is john", "pair"], ["my name is georges", "pair"]])
    test_single(("My name is John", "My name is Georges"))
    test_pair((("My name is John", "pair"), ("My name is Georges", "pair")))
    test_single(np.array(["My name is John", "My name is Georges"]))
    test_pair(np.array([("My name is John", "pair"), ("My name is Georges", "pair")]))
    test_pair(np.array([["My name is John", "pair"], ["My name is Georges", "pair"]]))

    test_single([["My", "name", "is", "John"], ["My", "name", "is", "Georges"]], True)
    test_pair([(["My", "name", "is", "John"], ["pair"]), (["My", "name", "is", "Georges"], ["pair"])], True)
    test_pair([[["My", "name", "is", "John"], ["pair"]], [["My", "name", "is", "Georges"], ["pair"]]], True)
    test_single((("My", "name", "is", "John"), ("My", "name", "is", "Georges")), True)
    test_pair(((("My", "name", "is", "John"), ("pair",)), (("My", "name", "is", "Georges"), ("pair",))), True)
    test_pair(((["My", "name", "is", "John"], ["pair"]), (["My", "name", "is", "Georges"], ["pair"])), True)
    test_single(np.array([["My", "name", "is", "John"], ["My", "name", "is", "Georges"]]), True)
    test_single(np.array((("My", "name", "is", "John"), ("My", "name", "is", "Georges"))), True)
    test_pair(np.array([[["My", "name", "is", "John"], ["pair"]], [["My", "name", "is", "Georges"], ["pair"]]],
                       dtype=object), True)
    test_pair(np.array(((("My", "name", "is", "John"), ("pair",)), (("My", "name", "is", "Georges"), ("pair",))),
                       dtype=object), True)

    # Mal formed
    with pytest.raises(TypeError, match="TextInputSequence must be str"):
        tokenizer.encode([["my", "name"]])
    with pytest.raises(TypeError, match="TextInputSequence must be str"):
        tokenizer.encode("My name is john", [["pair"]])
    with pytest.raises(TypeError, match="TextInputSequence must be str"):
        tokenizer.encode("my name is john", ["pair"])

    with pytest.raises(TypeError, match=r"InputSequence must be Union\[List\[str\]"):
        tokenizer.encode("My name is john", is_pretokenized=True)
    with pytest.raises(TypeError, match=r"InputSequence must be Union\[List\[str\]"):
        tokenizer.encode("My name is john", ["pair"], is_pretokenized=True)
    with pytest.raises(TypeError, match=r"InputSequence must be Union\[List\[str\]"):
        tokenizer.encode(["My", "name", "is", "John"], "pair", is_pretokenized=True)


def test_encode_add_special_tokens():
    from tokenizers import Tokenizer
    from tokenizers.models import BPE
    from tokenizers.pre_tokenizers import ByteLevel
    from tokenizers.processors import RobertaProcessing

    files = roberta_files()
    hf = Tokenizer(BPE(files["vocab"], files["merges"]))
    hf.add_special_tokens(["<s>", "</s>"])
    hf.pre_tokenizer = ByteLevel(add_prefix_space=True)
    hf.post_processor = RobertaProcessing(("</s>", hf.token_to_id("</s>")), ("<s>", hf.token_to_id("<s>")))
    tokenizer = as_fstok(hf)

    output_with_specials = tokenizer.encode("My name is John", add_special_tokens=True)
    assert output_with_specials.tokens == ["<s>", "ĠMy", "Ġname", "Ġis", "ĠJohn", "</s>"]
    output_without_specials = tokenizer.encode("My name is John", add_special_tokens=False)
    assert output_without_specials.tokens == ["ĠMy", "Ġname", "Ġis", "ĠJohn"]

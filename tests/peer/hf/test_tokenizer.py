"""HF tokenizers' bindings/python/tests/bindings/test_tokenizer.py, against fstok.Tokenizer (see PROVENANCE.md).

Upstream builds each tokenizer with HF's model classes (`Tokenizer(BPE())`, `tokenizer.normalizer = ...`);
here HF assembles the same pipeline and `fstok.Tokenizer` runs its tokenizer.json (`utils.as_fstok`), so
every assertion is about fstok's results. `AddedToken` and `DecodeStream` are fstok's (`fstok.AddedToken`,
`fstok.hf_decode.DecodeStream`). Network fixtures read the shared files instead (utils.py). Inputs and
expected values are upstream's.
"""
import concurrent.futures
import copy
import os
import pickle
import tempfile

import numpy as np
import pytest
from tokenizers import AddedToken as HFAddedToken
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders
from tokenizers.decoders import ByteFallback
from tokenizers.decoders import Metaspace as DecoderMetaspace
from tokenizers.models import BPE, Unigram
from tokenizers.normalizers import ByteLevel as NormalizerByteLevel

from fstok import AddedToken, Tokenizer
from fstok.hf_decode import DecodeStream

from .utils import E5_SMALL_JSON, as_fstok, bert_cased_dir, gpt2_tokenizer, llama31_tokenizer


def bpe_with(tokens):
    hf = HFTokenizer(BPE())
    hf.add_tokens(tokens)
    return as_fstok(hf)


class TestAddedToken:
    def test_instantiate_with_content_only(self):
        added_token = AddedToken("<mask>")
        added_token.content = "<MASK>"
        assert added_token.content == "<MASK>"
        assert type(added_token) == AddedToken
        added_token.content = added_token.content.lower()

        assert added_token.special == False
        added_token.special = True
        assert added_token.special == True
        added_token.special = False
        assert str(added_token) == "<mask>"
        assert (
            repr(added_token)
            == 'AddedToken("<mask>", rstrip=False, lstrip=False, single_word=False, normalized=True, special=False)'
        )
        assert added_token.rstrip == False
        assert added_token.lstrip == False
        assert added_token.single_word == False
        assert added_token.normalized == True
        assert isinstance(pickle.loads(pickle.dumps(added_token)), AddedToken)

    def test_can_set_rstrip(self):
        added_token = AddedToken("<mask>", rstrip=True)
        assert added_token.rstrip == True
        assert added_token.lstrip == False
        assert added_token.single_word == False
        assert added_token.normalized == True

    def test_can_set_lstrip(self):
        added_token = AddedToken("<mask>", lstrip=True)
        assert added_token.rstrip == False
        assert added_token.lstrip == True
        assert added_token.single_word == False
        assert added_token.normalized == True

    def test_can_set_single_world(self):
        added_token = AddedToken("<mask>", single_word=True)
        assert added_token.rstrip == False
        assert added_token.lstrip == False
        assert added_token.single_word == True
        assert added_token.normalized == True

    def test_can_set_normalized(self):
        added_token = AddedToken("<mask>", normalized=False)
        assert added_token.rstrip == False
        assert added_token.lstrip == False
        assert added_token.single_word == False
        assert added_token.normalized == False


class TestTokenizer:
    def test_has_expected_type_and_methods(self):
        # upstream also checks train and the model/normalizer attributes (outside fstok's face)
        tokenizer = bpe_with([])
        assert type(tokenizer) == Tokenizer
        assert callable(tokenizer.num_special_tokens_to_add)
        assert callable(tokenizer.get_vocab)
        assert callable(tokenizer.get_vocab_size)
        assert callable(tokenizer.enable_truncation)
        assert callable(tokenizer.no_truncation)
        assert callable(tokenizer.enable_padding)
        assert callable(tokenizer.no_padding)
        assert callable(tokenizer.encode)
        assert callable(tokenizer.encode_batch)
        assert callable(tokenizer.async_encode_batch)
        assert callable(tokenizer.decode)
        assert callable(tokenizer.decode_batch)
        assert callable(tokenizer.async_decode_batch)
        assert callable(tokenizer.token_to_id)
        assert callable(tokenizer.id_to_token)
        assert callable(tokenizer.add_tokens)
        assert callable(tokenizer.add_special_tokens)
        assert callable(tokenizer.post_process)
        assert isinstance(pickle.loads(pickle.dumps(tokenizer)), Tokenizer)

    def test_add_tokens(self):
        tokenizer = bpe_with([])
        added = tokenizer.add_tokens(["my", "name", "is", "john"])
        assert added == 4

        tokens = [AddedToken("the"), AddedToken("quick", normalized=False), AddedToken()]
        assert tokens[0].normalized == True
        added = tokenizer.add_tokens(tokens)
        assert added == 2
        assert tokens[0].normalized == True
        assert tokens[1].normalized == False

    def test_add_tokens_with_normalizer(self):
        hf = HFTokenizer(BPE())
        hf.normalizer = NormalizerByteLevel()
        hf.decoder = decoders.ByteLevel()
        tokenizer = as_fstok(hf)

        new_tokens = [AddedToken("Začnimo", normalized=False, special=True), AddedToken("kuća"), AddedToken("međa")]
        tokenizer.add_tokens(new_tokens)
        enc = tokenizer.encode(new_tokens[0].content + new_tokens[1].content + " " + new_tokens[2].content)
        assert tokenizer.decode(enc.ids, False) == "Za\rnimokućameđa"

        # Original content must be preserved in the decoder map regardless of normalization
        decoder_map = tokenizer.get_added_tokens_decoder()
        assert decoder_map[enc.ids[0]].content == "Začnimo"
        assert decoder_map[enc.ids[1]].content == "kuća"
        assert decoder_map[enc.ids[2]].content == "međa"

    def test_normalizer_change_refreshes_added_tokens(self):
        # upstream changes the normalizer of one tokenizer object; here HF does, and fstok runs each state
        hf = HFTokenizer(BPE())
        hf.decoder = decoders.ByteLevel()
        new_tokens = [HFAddedToken("kuća"), HFAddedToken("međa")]
        hf.add_tokens(new_tokens)
        hf.normalizer = NormalizerByteLevel()
        tokenizer = as_fstok(hf)

        enc = tokenizer.encode("kuća međa")
        assert tokenizer.decode(enc.ids, False) == "kućameđa"

        hf.normalizer = None
        tokenizer = as_fstok(hf)
        enc2 = tokenizer.encode("kuća međa")
        assert tokenizer.decode(enc2.ids, False) == "ku\x07ame\x11a"

    def test_add_special_tokens(self):
        tokenizer = bpe_with([])

        # Can add special tokens as `str`
        added = tokenizer.add_special_tokens(["my", "name", "is", "john"])
        assert added == 4

        # Can add special tokens as `AddedToken`
        tokens = [AddedToken("the"), AddedToken("quick", normalized=True), AddedToken()]
        assert tokens[0].normalized == True
        added = tokenizer.add_special_tokens(tokens)
        assert added == 2
        assert tokens[0].normalized == False
        assert tokens[1].normalized == True

    def test_encode(self):
        tokenizer = bpe_with(["my", "name", "is", "john", "pair"])

        # Can encode single sequence
        output = tokenizer.encode("my name is john")
        assert output.tokens == ["my", "name", "is", "john"]
        assert type(output.ids) == list
        assert type(output.type_ids) == list
        assert type(output.offsets) == list
        with pytest.warns(DeprecationWarning):
            assert type(output.words) == list
        assert type(output.word_ids) == list
        assert type(output.special_tokens_mask) == list
        assert type(output.attention_mask) == list
        assert type(output.overflowing) == list

        # Can encode a pair of sequences
        output = tokenizer.encode("my name is john", "pair")
        assert output.tokens == ["my", "name", "is", "john", "pair"]
        assert isinstance(pickle.loads(pickle.dumps(output)), type(output))

        # Can encode a single pre-tokenized sequence
        output = tokenizer.encode(["my", "name", "is", "john"], is_pretokenized=True)
        assert output.tokens == ["my", "name", "is", "john"]

        # Can encode a batch with both a single sequence and a pair of sequences
        output = tokenizer.encode_batch(["my name is john", ("my name is john", "pair")])
        assert len(output) == 2

    def test_truncation(self):
        tokenizer = bpe_with(["my", "name", "is", "john", "pair"])
        tokenizer.enable_truncation(2)

        # Can truncate single sequences
        output = tokenizer.encode("my name is john")
        assert output.tokens == ["my", "name"]

        # Can truncate pair sequences as well
        output = tokenizer.encode("my name is john", "pair")
        assert output.tokens == ["my", "pair"]

        # Can get the params and give them to enable_truncation
        trunc = tokenizer.truncation
        tokenizer.enable_truncation(**trunc)

        # Left truncation direction
        tokenizer.enable_truncation(2, direction="left")
        output = tokenizer.encode("my name is john")
        assert output.tokens == ["is", "john"]

        output = tokenizer.encode("my name is john", "pair")
        assert output.tokens == ["john", "pair"]

    def test_padding(self):
        tokenizer = bpe_with(["my", "name", "is", "john", "pair"])

        # By default it does nothing when encoding single sequence
        tokenizer.enable_padding()
        output = tokenizer.encode("my name")
        assert output.tokens == ["my", "name"]

        # Can pad to the longest in a batch
        output = tokenizer.encode_batch(["my name", "my name is john"])
        assert all([len(encoding) == 4 for encoding in output])

        # Can pad to the specified length otherwise
        tokenizer.enable_padding(length=4)
        output = tokenizer.encode("my name")
        assert output.tokens == ["my", "name", "[PAD]", "[PAD]"]
        output = tokenizer.encode("my name", "pair")
        assert output.tokens == ["my", "name", "pair", "[PAD]"]

        # Can get the params and give them to enable_padding
        padding = tokenizer.padding
        tokenizer.enable_padding(**padding)

    def test_decode(self):
        tokenizer = bpe_with(["my", "name", "is", "john", "pair"])

        # Can decode single sequences
        output = tokenizer.decode([0, 1, 2, 3])
        assert output == "my name is john"

        # Can decode batch
        output = tokenizer.decode_batch([[0, 1, 2, 3], [4]])
        assert output == ["my name is john", "pair"]

        # Can decode stream
        stream = DecodeStream(skip_special_tokens=False)
        assert stream.step(tokenizer, 0) == "my"
        assert stream.step(tokenizer, 1) == " name"
        assert stream.step(tokenizer, 2) == " is"
        assert stream.step(tokenizer, 3) == " john"

        stream = DecodeStream(ids=[0, 1, 2])
        assert stream.step(tokenizer, 3) == " john"

    def test_decode_stream_copy_and_prefix_ids(self):
        tokenizer = bpe_with(["my", "name", "is", "john"])
        token_ids = [0, 1, 2, 3]

        stream = DecodeStream(skip_special_tokens=False)
        assert stream.step(tokenizer, token_ids[0]) == "my"
        assert stream.step(tokenizer, token_ids[1]) == " name"
        stream_copy = copy.copy(stream)
        assert stream.step(tokenizer, token_ids[2]) == " is"
        assert stream_copy.step(tokenizer, token_ids[2]) == " is"
        assert stream.step(tokenizer, token_ids[3]) == " john"
        assert stream_copy.step(tokenizer, token_ids[3]) == " john"

        stream_steps = DecodeStream([])
        last_chunk = None
        for tid in token_ids:
            last_chunk = stream_steps.step(tokenizer, tid)
        stream_prefill = DecodeStream(token_ids[:-1])
        assert stream_prefill.step(tokenizer, token_ids[-1]) == last_chunk

    def test_decode_stream_fallback(self):
        tokenizer = gpt2_tokenizer()
        # tokenizer.decode([255]) fails because its a fallback
        # tokenizer.encode("อั").ids = [19567, 255, 19567, 109]
        stream = DecodeStream()
        stream.step(tokenizer, [19567])
        stream.step(tokenizer, [255])
        stream.step(tokenizer, [19567])
        out = stream.step(tokenizer, [109])
        assert out == "ั"

        stream = DecodeStream()
        out = stream.step(tokenizer, [19567, 255, 19567, 109])
        assert out == "อั"
        stream = DecodeStream()
        stream.step(tokenizer, [19567])
        out = stream.step(tokenizer, [255, 19567, 109])
        assert out == "อั"

        stream = DecodeStream()
        stream.step(tokenizer, [19567])
        first_out = stream.step(tokenizer, [255])
        assert first_out == "อ"
        # since we emitted the 'อ', we can't produce 'อั'
        out = stream.step(tokenizer, [19567, 109])
        assert out == "ั"

        stream = DecodeStream([19567, 255, 19567])
        # the stream's prefix is 'อ�' which is invalid, thus all ids are kept for the next step
        out = stream.step(tokenizer, [109])
        assert out == "อั"

    def test_decode_skip_special_tokens(self):
        tokenizer = llama31_tokenizer()

        stream = DecodeStream([40])
        out = stream.step(tokenizer, [2846, 40, 40, 40])
        assert out == "'mIII"

        stream = DecodeStream(
            [128000, 128006, 9125, 128007, 271, 38766, 1303, 33025, 2696, 25, 6790, 220, 2366, 18, 198, 15724, 2696,
             25, 220, 1627, 10263, 220, 2366, 19, 271, 9514, 527, 264, 11190, 18328, 13, 128009, 128006, 882, 128007,
             271, 15339, 11, 1268, 527, 499, 30, 128009, 128006, 78191, 128007, 271]
        )
        out = stream.step(tokenizer, 40)
        assert out == "I"

        stream = DecodeStream([40])
        out = stream.step(tokenizer, 2846)
        assert out == "'m"

        stream = DecodeStream([40])
        out = stream.step(tokenizer, [2846, 40, 40, 40])
        assert out == "'mIII"

    def test_decode_stream(self):
        vocab = [
            ("<unk>", 0.0),
            ("<0x20>", -0.1),
            ("<0xC3>", -0.2),
            ("<0xA9>", -0.3),
        ]
        hf = HFTokenizer(Unigram(vocab, 0, byte_fallback=True))
        hf.decoder = ByteFallback()
        tokenizer = as_fstok(hf)
        stream = DecodeStream(skip_special_tokens=False)
        assert stream.step(tokenizer, 1) == " "
        assert stream.step(tokenizer, 2) == None
        assert stream.step(tokenizer, 3) == "é"

        vocab = [
            ("<unk>", 0.0),
            ("▁This", -0.1),
        ]
        hf = HFTokenizer(Unigram(vocab, 0, byte_fallback=False))
        hf.decoder = DecoderMetaspace()
        tokenizer = as_fstok(hf)
        stream = DecodeStream(skip_special_tokens=False)
        assert stream.step(tokenizer, 1) == "This"
        assert stream.step(tokenizer, 1) == " This"

    def test_get_vocab(self):
        tokenizer = bpe_with(["my", "name", "is", "john", "pair"])

        # Can retrieve vocab with added tokens
        vocab = tokenizer.get_vocab(with_added_tokens=True)
        assert vocab == {"is": 2, "john": 3, "my": 0, "name": 1, "pair": 4}

        # Can retrieve vocab without added tokens
        vocab = tokenizer.get_vocab(with_added_tokens=False)
        assert vocab == {}

        # Can retrieve added token decoder
        vocab = tokenizer.get_added_tokens_decoder()
        assert vocab == {
            0: AddedToken("my", rstrip=False, lstrip=False, single_word=False, normalized=True, special=False),
            1: AddedToken("name", rstrip=False, lstrip=False, single_word=False, normalized=True, special=False),
            2: AddedToken("is", rstrip=False, lstrip=False, single_word=False, normalized=True, special=False),
            3: AddedToken("john", rstrip=False, lstrip=False, single_word=False, normalized=True, special=False),
            4: AddedToken("pair", rstrip=False, lstrip=False, single_word=False, normalized=True, special=False),
        }

    def test_get_vocab_size(self):
        tokenizer = bpe_with(["my", "name", "is", "john", "pair"])

        # Can retrieve vocab's size with added tokens
        size = tokenizer.get_vocab_size(with_added_tokens=True)
        assert size == 5

        # Can retrieve vocab's size without added tokens
        size = tokenizer.get_vocab_size(with_added_tokens=False)
        assert size == 0

    def test_post_process(self):
        tokenizer = bpe_with(["my", "name", "is", "john", "pair"])
        tokenizer.enable_truncation(2)
        tokenizer.enable_padding(length=4)

        encoding = tokenizer.encode("my name is john")
        pair_encoding = tokenizer.encode("pair")

        # Can post process a single encoding
        output = tokenizer.post_process(encoding)
        assert output.tokens == ["my", "name", "[PAD]", "[PAD]"]

        # Can post process a pair of encodings
        output = tokenizer.post_process(encoding, pair_encoding)
        assert output.tokens == ["my", "pair", "[PAD]", "[PAD]"]

    def test_multithreaded_concurrency(self):
        # Create a single shared tokenizer instance (thread-safe)
        shared_tokenizer = bpe_with([])

        # Thread worker functions that use the SAME tokenizer instance
        def encode_batch(batch):
            return shared_tokenizer.encode_batch(batch)

        def encode_batch_fast(batch):
            return shared_tokenizer.encode_batch_fast(batch)

        # Create some significant workload
        batches = [
            ["my name is john " * 50] * 20,
            ["my name is paul " * 50] * 20,
            ["my name is ringo " * 50] * 20,
        ]

        # Many encoding operations to run concurrently using the same tokenizer
        tasks = [
            (encode_batch, batches[0]),
            (encode_batch_fast, batches[1]),
            (encode_batch, batches[2]),
        ] * 10

        executor = concurrent.futures.ThreadPoolExecutor(max_workers=4)

        futures = []
        for function, argument in tasks:
            futures.append(executor.submit(function, argument))

        # All tasks should complete successfully
        results = [f.result() for f in futures]

        # Verify results
        assert len(results) == 30
        assert all(len(result) == 20 for result in results)

    def test_from_pretrained(self):
        # upstream: Tokenizer.from_pretrained("bert-base-cased") from the hub; here a local directory
        tokenizer = Tokenizer.from_pretrained(bert_cased_dir())
        output = tokenizer.encode("Hey there dear friend!", add_special_tokens=False)
        assert output.tokens == ["Hey", "there", "dear", "friend", "!"]

    def test_unigram_byte_fallback(self):
        vocab = [
            ("<unk>", 0.0),
            ("A", -0.03),
            ("sen", -0.02),
            ("te", -0.03),
            ("n", -0.04),
            ("ce", -0.05),
            ("<0xF0>", -0.06),
            ("<0x9F>", -0.06),
            ("<0xA4>", -0.06),
            ("<0x97>", -0.06),
            (" ", -0.4),
        ]
        tokenizer = as_fstok(HFTokenizer(Unigram(vocab, 0, byte_fallback=False)))

        output = tokenizer.encode("A sentence 🤗")
        assert output.ids == [1, 10, 2, 3, 4, 5, 10, 0]
        assert output.tokens == ["A", " ", "sen", "te", "n", "ce", " ", "🤗"]

        tokenizer = as_fstok(HFTokenizer(Unigram(vocab, 0, byte_fallback=True)))

        output = tokenizer.encode("A sentence 🤗")
        assert output.ids == [1, 10, 2, 3, 4, 5, 10, 6, 7, 8, 9]
        assert output.tokens == ["A", " ", "sen", "te", "n", "ce", " ", "<0xF0>", "<0x9F>", "<0xA4>", "<0x97>"]

    def test_decode_special(self):
        tokenizer = bpe_with([])
        tokenizer.add_tokens([AddedToken("my", special=True), AddedToken("name", special=False), "is", "john", "pair"])

        # Can decode single sequences
        output = tokenizer.decode([0, 1, 2, 3], skip_special_tokens=False)
        assert output == "my name is john"

        output = tokenizer.decode([0, 1, 2, 3], skip_special_tokens=True)
        assert output == "name is john"
        assert tokenizer.get_added_tokens_decoder()[0] == AddedToken("my", special=True)

    def test_encode_special_tokens(self):
        # upstream loads t5-base (Unigram, Metaspace); multilingual-e5-small is the shared file of that family.
        # Its vocabulary splits "dear" as "▁de" "ar" where t5-base has "▁dear"; every other token is upstream's.
        tokenizer = Tokenizer.from_file(E5_SMALL_JSON)
        tokenizer.add_tokens(["<eot>"])
        tokenizer.add_special_tokens(["<end_of_text>"])
        output = tokenizer.encode("Hey there<end_of_text> dear<eot>friend!", add_special_tokens=False)
        assert output.tokens == ["▁Hey", "▁there", "<end_of_text>", "▁de", "ar", "<eot>", "▁friend", "!"]

        tokenizer.encode_special_tokens = True
        assert tokenizer.encode_special_tokens == True

        output = tokenizer.encode("Hey there<end_of_text> dear<eot>friend!", add_special_tokens=False)
        assert output.tokens == [
            "▁Hey",
            "▁there",
            "<",
            "end",
            "_",
            "of",
            "_",
            "text",
            ">",
            "▁de",
            "ar",
            "<eot>",
            "▁friend",
            "!",
        ]

        tokenizer.add_tokens(["of_text>"])
        output = tokenizer.encode("Hey there<end_of_text> dear<eot>friend!", add_special_tokens=False)
        assert output.tokens == ["▁Hey", "▁there", "<", "end", "_", "of_text>", "▁de", "ar", "<eot>", "▁friend", "!"]

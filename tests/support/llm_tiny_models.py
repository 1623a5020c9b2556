"""A tiny random Llama causal LM and a tiny BPE tokenizer (<s>, </s>, <unk>), built in the test:
same architecture and state-dict layout as GREEN-RadLlama2-7b, a few hundred kB."""
from __future__ import annotations

from pathlib import Path


def build_tiny_llama(folder: Path, *, corpus: list[str], seed: int = 0) -> Path:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=["<unk>", "<s>", "</s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", tok.token_to_id("<s>"))])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    fast.save_pretrained(folder)
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.eos_token_id,
    )
    LlamaForCausalLM(config).save_pretrained(folder)
    return folder


# Gemma 3's chat template (google/gemma-3-4b-it tokenizer_config.json, which MedGemma and
# rajpurkarlab/medgemma-4b-it-crimson use): the system message joins the first user turn.
GEMMA3_CHAT_TEMPLATE = (
    "{{ bos_token }}\n"
    "{%- if messages[0]['role'] == 'system' -%}\n"
    "    {%- if messages[0]['content'] is string -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}\n"
    "    {%- else -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\\n\\n' -%}\n"
    "    {%- endif -%}\n"
    "    {%- set loop_messages = messages[1:] -%}\n"
    "{%- else -%}\n"
    "    {%- set first_user_prefix = \"\" -%}\n"
    "    {%- set loop_messages = messages -%}\n"
    "{%- endif -%}\n"
    "{%- for message in loop_messages -%}\n"
    "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
    "        {{ raise_exception(\"Conversation roles must alternate user/assistant/user/assistant/...\") }}\n"
    "    {%- endif -%}\n"
    "    {%- if (message['role'] == 'assistant') -%}\n"
    "        {%- set role = \"model\" -%}\n"
    "    {%- else -%}\n"
    "        {%- set role = message['role'] -%}\n"
    "    {%- endif -%}\n"
    "    {{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else \"\") }}\n"
    "    {%- if message['content'] is string -%}\n"
    "        {{ message['content'] | trim }}\n"
    "    {%- elif message['content'] is iterable -%}\n"
    "        {%- for item in message['content'] -%}\n"
    "            {%- if item['type'] == 'image' -%}\n"
    "                {{ '<start_of_image>' }}\n"
    "            {%- elif item['type'] == 'text' -%}\n"
    "                {{ item['text'] | trim }}\n"
    "            {%- endif -%}\n"
    "        {%- endfor -%}\n"
    "    {%- else -%}\n"
    "        {{ raise_exception(\"Invalid content type\") }}\n"
    "    {%- endif -%}\n"
    "    {{ '<end_of_turn>\\n' }}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "    {{'<start_of_turn>model\\n'}}\n"
    "{%- endif -%}\n"
)
# Gemma's special tokens in Gemma's order (pad 0, eos 1, bos 2, unk 3); <end_of_turn> ends a turn
TINY_MAX_NEW_TOKENS = 24
GEMMA_SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<start_of_turn>", "<end_of_turn>",
                  "<start_of_image>", "<end_of_image>", "<image_soft_token>"]


def build_tiny_gemma3(folder: Path, *, corpus: list[str], seed: int = 0, weights: bool = True) -> Path:
    """A tiny random Gemma 3 vision-language model (MedGemma-4b's architecture,
    Gemma3ForConditionalGeneration) with a small BPE tokenizer carrying Gemma's special
    tokens and chat template, and a generation_config that ends at <end_of_turn> as
    MedGemma's does. `weights=False`: the tokenizer alone."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import GenerationConfig, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=700, special_tokens=GEMMA_SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer)
    tok.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", tok.token_to_id("<bos>"))])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<bos>", eos_token="<eos>", unk_token="<unk>",
                                   pad_token="<pad>", additional_special_tokens=GEMMA_SPECIALS[4:])
    fast.chat_template = GEMMA3_CHAT_TEMPLATE
    fast.save_pretrained(folder)
    if not weights:
        return folder
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration

    torch.manual_seed(seed)
    ids = {t: fast.convert_tokens_to_ids(t) for t in GEMMA_SPECIALS}
    config = Gemma3Config(
        text_config=dict(vocab_size=len(fast), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=16384,
                         sliding_window=64, query_pre_attn_scalar=8, pad_token_id=0, bos_token_id=2, eos_token_id=1),
        vision_config=dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                           image_size=28, patch_size=14),
        mm_tokens_per_image=1, boi_token_index=ids["<start_of_image>"], eoi_token_index=ids["<end_of_image>"],
        image_token_index=ids["<image_soft_token>"], pad_token_id=0, bos_token_id=2, eos_token_id=1,
    )
    model = Gemma3ForConditionalGeneration(config)
    # greedy and short (a random model rarely stops): what the official path generates with
    model.generation_config = GenerationConfig(bos_token_id=2, pad_token_id=0, eos_token_id=[1, ids["<end_of_turn>"]],
                                               do_sample=False, max_new_tokens=TINY_MAX_NEW_TOKENS)
    model.save_pretrained(folder)
    return folder

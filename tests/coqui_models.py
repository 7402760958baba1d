"""Small, randomly initialised Coqui models built from Coqui's own config classes and saved the
way Coqui saves them (``config.json`` + ``model.pth``, ``vocab.json`` for XTTS), so the engine's
real loading and inference code runs on them. Their voices are noise-like; what they test is
the plumbing: loading, speakers, languages, durations, word times, determinism."""

from __future__ import annotations

import math
from pathlib import Path

ZH = "我明天有个会议你好谢谢请帮查一下航班上海北京的"
LATIN = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'"


def tiny_vits(folder: Path, speakers: int = 20, seed: int = 0) -> Path:
    """A grapheme VITS (Latin letters + the Chinese characters of the tests) with a speaker table
    and the deterministic duration predictor, its output bias set so tokens last ~6 frames."""
    import torch
    from TTS.tts.configs.shared_configs import CharactersConfig
    from TTS.tts.configs.vits_config import VitsArgs, VitsConfig
    from TTS.tts.models.vits import Vits

    folder.mkdir(parents=True, exist_ok=True)
    chars = CharactersConfig(characters_class="TTS.tts.models.vits.VitsCharacters", pad="<PAD>", eos="<EOS>",
                             bos="<BOS>", blank="<BLNK>", characters=LATIN + ZH,
                             punctuations="!,.?;:- ，。？！", phonemes=None)
    args = VitsArgs(hidden_channels=32, hidden_channels_ffn_text_encoder=64, num_layers_text_encoder=2,
                    num_layers_posterior_encoder=2, num_layers_flow=1, upsample_initial_channel_decoder=32,
                    resblock_kernel_sizes_decoder=[3], resblock_dilation_sizes_decoder=[[1, 3, 5]],
                    use_speaker_embedding=speakers > 1, speaker_embedding_channels=16,
                    init_discriminator=False, spec_segment_size=8, use_sdp=False)
    config = VitsConfig(model_args=args, characters=chars, use_phonemes=False, text_cleaner="multilingual_cleaners",
                        add_blank=True, use_speaker_embedding=speakers > 1,
                        speakers=[f"spk{i:02d}" for i in range(speakers)] if speakers > 1 else None)
    config.audio.sample_rate = 22050
    torch.manual_seed(seed)
    model = Vits(config)
    with torch.no_grad():  # about 6 frames (70 ms) per token, as a trained model predicts, not ~1
        model.duration_predictor.proj.weight.mul_(0.1)
        model.duration_predictor.proj.bias.fill_(math.log(6.0))
    torch.save({"model": model.state_dict()}, folder / "model.pth")
    config.save_json(str(folder / "config.json"))
    return folder


def tiny_xtts(folder: Path, seed: int = 0, builtin: tuple[str, ...] = ("Ana Florence",)) -> Path:
    """An XTTS with a 2-layer GPT, a character vocabulary (``[en]``, ``[zh-cn]`` and pinyin
    letters, since XTTS's Mandarin front end writes Chinese as pinyin), at most 40 audio codes,
    and ``speakers_xtts.pth`` with built-in speakers conditioned on noise, as XTTS-v2 ships them."""
    import torch
    from tokenizers import Tokenizer, models
    from TTS.tts.configs.xtts_config import XttsArgs, XttsConfig
    from TTS.tts.layers.xtts.tokenizer import VoiceBpeTokenizer
    from TTS.tts.models.xtts import Xtts

    folder.mkdir(parents=True, exist_ok=True)
    special = ["[STOP]", "[UNK]", "[SPACE]", "[START]", "[en]", "[zh-cn]"]
    vocab = {t: i for i, t in enumerate(special + list("abcdefghijklmnopqrstuvwxyz0123456789'.,!?-"))}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="[UNK]"))
    tok.add_special_tokens(special)
    tok.save(str(folder / "vocab.json"))
    args = XttsArgs(gpt_layers=2, gpt_n_model_channels=64, gpt_n_heads=2, decoder_input_dim=64,
                    gpt_max_audio_tokens=40, gpt_max_text_tokens=200, gpt_max_prompt_tokens=20,
                    gpt_num_audio_tokens=66, gpt_start_audio_token=64, gpt_stop_audio_token=65)
    config = XttsConfig(model_args=args, languages=["en", "zh-cn"])
    torch.manual_seed(seed)
    model = Xtts(config)
    model.tokenizer = VoiceBpeTokenizer(vocab_file=str(folder / "vocab.json"))
    model.init_models()
    speakers = {}
    for i, name in enumerate(builtin):
        clip = 0.1 * torch.randn(1, 22050 * 2, generator=torch.Generator().manual_seed(seed + i))
        speakers[name] = {"gpt_cond_latent": model.get_gpt_cond_latents(clip, 22050),
                          "speaker_embedding": model.get_speaker_embedding(clip, 22050)}
    torch.save(speakers, folder / "speakers_xtts.pth")
    torch.save({"model": model.state_dict()}, folder / "model.pth")
    config.save_json(str(folder / "config.json"))
    return folder

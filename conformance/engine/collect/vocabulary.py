"""Token strings back to token ids, for OpenAI-compatible servers that return strings, never ids.

A `Vocabulary` reads the model's tokens from a Hugging Face tokenizer (``tokenizer.json``, in a model directory or
given itself) or from a GGUF file (``tokenizer.ggml.tokens``), and turns each token into the bytes it decodes to:
byte-level BPE pieces through GPT-2's byte alphabet (``Ġ`` is a space), SentencePiece pieces with ``▁`` as a space
and ``<0xNN>`` as one byte; added and control tokens as their text. A server shows a token as a string, which is
those bytes decoded as UTF-8. Where that string names exactly one token, it is that token's id; where it names none
or several (two tokens with the same text, a token that ends inside a UTF-8 character and is shown lossily), the
mapping refuses with an error naming the string and the candidates: it never guesses.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path


def _gpt2_byte_decoder() -> dict[str, int]:
    """GPT-2's printable stand-in of each byte (bytes_to_unicode), inverted."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), 256),
    ]
    chars, extra = list(printable), 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars)}


def piece_bytes(piece: str, byte_level: bool, byte_decoder: dict[str, int]) -> bytes:
    """The bytes one vocabulary piece decodes to."""
    if byte_level:
        if all(ch in byte_decoder for ch in piece):
            return bytes(byte_decoder[ch] for ch in piece)
        return piece.encode("utf-8")
    if len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
        return bytes([int(piece[3:5], 16)])
    return piece.replace("▁", " ").encode("utf-8")


class Vocabulary:
    """Token strings -> ids (see the module's docstring)."""

    def __init__(
        self, token_bytes: list[bytes], source: str, end_ids: tuple[int, ...] = ()
    ) -> None:
        self.source, self.size, self._bytes = source, len(token_bytes), token_bytes
        self.end_ids = end_ids  # the model's end-of-generation ids, first the EOS (empty when the files say none)
        # the model's chat template (Jinja), where its files hold one
        self.chat_template: str | None = None
        self._by_text: dict[str, list[int]] = defaultdict(list)
        for token_id, raw in enumerate(token_bytes):
            try:
                self._by_text[raw.decode("utf-8")].append(token_id)
            # shown lossily by servers: register the usual renderings, to refuse them
            except UnicodeDecodeError:
                for shown in (
                    raw.decode("utf-8", errors="replace"),
                    raw.decode("utf-8", errors="ignore"),
                ):
                    self._by_text[shown].append(token_id)

    @classmethod
    def from_path(cls, path: str | Path) -> "Vocabulary":
        """From a model directory or tokenizer.json (Hugging Face) or a .gguf file (ValueError naming the path)."""
        path = Path(path).expanduser()
        if path.is_dir():
            path = path / "tokenizer.json"
        if not path.is_file():
            raise ValueError(
                f"--tokenizer: {path} is not a tokenizer.json, a model directory holding one, or a GGUF"
            )
        if path.suffix == ".gguf":
            pieces, source, end_ids, template = _gguf_tokens(path)
            vocabulary = cls(pieces, source, end_ids)
        else:
            vocabulary, template = (
                cls(*_hf_tokens(path), end_ids=_hf_end_ids(path.parent)),
                _hf_template(path.parent),
            )
        vocabulary.chat_template = template
        return vocabulary

    def chat_text(self, messages: list[dict]) -> str:
        """`messages` through the model's chat template, with the generation prompt (ValueError when it has none)."""
        if not self.chat_template:
            raise ValueError(
                f"prompts: {self.source} holds no chat template: give text or prompt_tokens"
            )
        try:
            from jinja2.sandbox import ImmutableSandboxedEnvironment
        except ImportError:
            raise ValueError(
                "prompts: a chat template needs jinja2 (pip install 'exactspec[engine]')"
            ) from None

        def raise_exception(message: str) -> None:
            raise ValueError(f"prompts: the chat template refuses the messages: {message}")

        def shown(token_id: int | None) -> str:
            return (
                self._bytes[token_id].decode("utf-8", errors="replace")
                if token_id is not None
                else ""
            )

        environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        template = environment.from_string(self.chat_template)
        return template.render(
            messages=messages,
            add_generation_prompt=True,
            raise_exception=raise_exception,
            eos_token=shown(self.end_ids[0] if self.end_ids else None),
            bos_token="",
        )

    def candidates(self, text: str) -> list[int]:
        """Every token shown as `text` (none, one, or several that a server shows alike)."""
        return sorted(self._by_text.get(text, []))

    def text_of(self, token_ids: list[int]) -> str | None:
        """The text `token_ids` decode to, or None where their bytes are not UTF-8 (an id out of range: ValueError)."""
        outside = [int(t) for t in token_ids if not 0 <= int(t) < self.size]
        if outside:
            raise ValueError(
                f"token ids: {outside[:5]} are out of {self.source}'s range 0..{self.size - 1}"
            )
        try:
            return b"".join(self._bytes[int(t)] for t in token_ids).decode("utf-8")
        except UnicodeDecodeError:
            return None

    def id_of(self, text: str, where: str) -> int:
        """The one token shown as `text` (ValueError naming `where`, the string and the candidates otherwise)."""
        ids = self._by_text.get(text, [])
        if len(ids) == 1:
            return ids[0]
        if not ids:
            raise ValueError(f"{where}: the token string {text!r} is no token of {self.source}")
        raise ValueError(
            f"{where}: the token string {text!r} is ambiguous in {self.source}: ids {sorted(ids)[:8]} "
            "(the server shows them alike; use a server that returns token ids)"
        )


def _hf_tokens(path: Path) -> tuple[list[bytes], str]:
    try:
        spec = json.loads(path.read_text(encoding="utf-8"))
        vocab = spec["model"]["vocab"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(
            f"--tokenizer: {path} is not a Hugging Face tokenizer.json ({error})"
        ) from None
    if isinstance(vocab, list):  # Unigram: [[piece, score], ...]
        vocab = {entry[0]: i for i, entry in enumerate(vocab)}
    byte_level = "ByteLevel" in json.dumps(spec.get("decoder") or {}) or "ByteLevel" in json.dumps(
        spec.get("pre_tokenizer") or {}
    )
    added = {int(t["id"]): t["content"] for t in spec.get("added_tokens") or []}
    size = max([*vocab.values(), *added]) + 1
    decoder, pieces = _gpt2_byte_decoder(), [b""] * size
    for piece, token_id in vocab.items():
        pieces[int(token_id)] = piece_bytes(piece, byte_level, decoder)
    for token_id, content in added.items():
        pieces[token_id] = content.encode("utf-8")
    return pieces, str(path)


def _hf_end_ids(directory: Path) -> tuple[int, ...]:
    """The EOS ids a Hugging Face model directory declares (generation_config.json, then config.json)."""
    for name in ("generation_config.json", "config.json"):
        try:
            found = json.loads((directory / name).read_text(encoding="utf-8")).get("eos_token_id")
        except (OSError, ValueError, AttributeError):
            continue
        ids = found if isinstance(found, list) else [found]
        if ids and all(isinstance(i, int) for i in ids):
            return tuple(ids)
    return ()


def _hf_template(directory: Path) -> str | None:
    """The chat template of a Hugging Face model directory (tokenizer_config.json), if any."""
    try:
        found = json.loads((directory / "tokenizer_config.json").read_text(encoding="utf-8")).get(
            "chat_template"
        )
    except (OSError, ValueError, AttributeError):
        return None
    return found if isinstance(found, str) else None


def _gguf_tokens(path: Path) -> tuple[list[bytes], str, tuple[int, ...], str | None]:
    try:
        from gguf import GGUFReader
    except ImportError:
        raise ValueError(
            "--tokenizer: reading a GGUF needs the gguf package (pip install gguf)"
        ) from None
    reader = GGUFReader(str(path))
    fields = reader.fields
    try:
        tokens = [
            bytes(fields["tokenizer.ggml.tokens"].parts[i]).decode("utf-8")
            for i in fields["tokenizer.ggml.tokens"].data
        ]
        model = bytes(fields["tokenizer.ggml.model"].parts[-1]).decode("utf-8")
    except KeyError as error:
        raise ValueError(f"--tokenizer: {path} holds no {error} field") from None
    kinds = fields.get("tokenizer.ggml.token_type")
    types = [int(kinds.parts[i][0]) for i in kinds.data] if kinds is not None else [1] * len(tokens)
    decoder = _gpt2_byte_decoder()
    control = (3, 4)  # llama.cpp's CONTROL and USER_DEFINED: shown as their text
    pieces = [
        piece.encode("utf-8") if kind in control else piece_bytes(piece, model == "gpt2", decoder)
        for piece, kind in zip(tokens, types)
    ]
    ends = [
        int(fields[key].parts[-1][0])
        for key in ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id")
        if key in fields
    ]
    template = (
        bytes(fields["tokenizer.chat_template"].parts[-1]).decode("utf-8")
        if "tokenizer.chat_template" in fields
        else None
    )
    return pieces, str(path), tuple(dict.fromkeys(ends)), template


__all__ = ["Vocabulary", "piece_bytes"]

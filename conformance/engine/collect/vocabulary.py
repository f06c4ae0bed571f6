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
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), 256)]
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

    def __init__(self, token_bytes: list[bytes], source: str) -> None:
        self.source, self.size = source, len(token_bytes)
        self._by_text: dict[str, list[int]] = defaultdict(list)
        for token_id, raw in enumerate(token_bytes):
            try:
                self._by_text[raw.decode("utf-8")].append(token_id)
            except UnicodeDecodeError:  # shown lossily by servers: register the usual renderings, to refuse them
                for shown in (raw.decode("utf-8", errors="replace"), raw.decode("utf-8", errors="ignore")):
                    self._by_text[shown].append(token_id)

    @classmethod
    def from_path(cls, path: str | Path) -> "Vocabulary":
        """From a model directory or tokenizer.json (Hugging Face) or a .gguf file (ValueError naming the path)."""
        path = Path(path).expanduser()
        if path.is_dir():
            path = path / "tokenizer.json"
        if not path.is_file():
            raise ValueError(f"--tokenizer: {path} is not a tokenizer.json, a model directory holding one, or a GGUF")
        if path.suffix == ".gguf":
            return cls(*_gguf_tokens(path))
        return cls(*_hf_tokens(path))

    def id_of(self, text: str, where: str) -> int:
        """The one token shown as `text` (ValueError naming `where`, the string and the candidates otherwise)."""
        ids = self._by_text.get(text, [])
        if len(ids) == 1:
            return ids[0]
        if not ids:
            raise ValueError(f"{where}: the token string {text!r} is no token of {self.source}")
        raise ValueError(f"{where}: the token string {text!r} is ambiguous in {self.source}: ids {sorted(ids)[:8]} "
                         "(the server shows them alike; use a server that returns token ids)")


def _hf_tokens(path: Path) -> tuple[list[bytes], str]:
    try:
        spec = json.loads(path.read_text(encoding="utf-8"))
        vocab = spec["model"]["vocab"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"--tokenizer: {path} is not a Hugging Face tokenizer.json ({error})") from None
    if isinstance(vocab, list):  # Unigram: [[piece, score], ...]
        vocab = {entry[0]: i for i, entry in enumerate(vocab)}
    byte_level = "ByteLevel" in json.dumps(spec.get("decoder") or {}) or \
        "ByteLevel" in json.dumps(spec.get("pre_tokenizer") or {})
    added = {int(t["id"]): t["content"] for t in spec.get("added_tokens") or []}
    size = max([*vocab.values(), *added]) + 1
    decoder, pieces = _gpt2_byte_decoder(), [b""] * size
    for piece, token_id in vocab.items():
        pieces[int(token_id)] = piece_bytes(piece, byte_level, decoder)
    for token_id, content in added.items():
        pieces[token_id] = content.encode("utf-8")
    return pieces, str(path)


def _gguf_tokens(path: Path) -> tuple[list[bytes], str]:
    try:
        from gguf import GGUFReader
    except ImportError:
        raise ValueError("--tokenizer: reading a GGUF needs the gguf package (pip install gguf)") from None
    reader = GGUFReader(str(path))
    fields = reader.fields
    try:
        tokens = [bytes(fields["tokenizer.ggml.tokens"].parts[i]).decode("utf-8")
                  for i in fields["tokenizer.ggml.tokens"].data]
        model = bytes(fields["tokenizer.ggml.model"].parts[-1]).decode("utf-8")
    except KeyError as error:
        raise ValueError(f"--tokenizer: {path} holds no {error} field") from None
    kinds = fields.get("tokenizer.ggml.token_type")
    types = [int(kinds.parts[i][0]) for i in kinds.data] if kinds is not None else [1] * len(tokens)
    decoder = _gpt2_byte_decoder()
    control = (3, 4)  # llama.cpp's CONTROL and USER_DEFINED: shown as their text
    pieces = [piece.encode("utf-8") if kind in control else piece_bytes(piece, model == "gpt2", decoder)
              for piece, kind in zip(tokens, types)]
    return pieces, str(path)


__all__ = ["Vocabulary", "piece_bytes"]

"""Frozen random structure derived from a seed: the common part of permutations and masks.

An RP Mixer's permutations and an SW-MLP's masks are not learned and not stored: each is derived from
(seed, layer key) by a counter-based hash (identical on every machine), kept in non-persistent buffers, and
represented in the state dict by one int64 digest. :class:`DerivedStructure` is what such a layer shares:

* the digest key it owns in the state dict, and the check of a state dict against it
  (:meth:`~DerivedStructure.check_state`), which also finds the seed a mismatching checkpoint was made with;
* (re)computing the buffers (:meth:`~DerivedStructure.init_non_persistent_buffers`, timm's convention), also
  after a meta-device model is materialised with ``to_empty`` or loaded with ``load_state_dict(assign=True)``,
  and a clear error when a materialised model's buffers were never computed: built on the meta device, moved
  there (``model.to('meta')``) or passed through ``to_empty()``, a layer knows its buffers hold no values and
  refuses to run until they are recomputed (it never gathers with uninitialised indices);
* a fingerprint item for comparing replicas across data-parallel ranks.
"""
import hashlib
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

import numpy as np
import torch

from ..errors import CheckpointMismatchError, NotMaterializedError

__all__ = ['DerivedStructure', 'StructureProblem', 'hashed_uniform_keys', 'structure_digest', 'SEED_SEARCH_LIMIT']

SEED_SEARCH_LIMIT = 256       # seeds 0..255 are tried to name the seed of a mismatching checkpoint
_SEED_SEARCH_BUDGET_S = 5.0   # ... for at most this long

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser on a uint64 array (wrapping arithmetic)."""
    with np.errstate(over='ignore'):
        z = x + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _MIX1
        z = (z ^ (z >> np.uint64(27))) * _MIX2
        return z ^ (z >> np.uint64(31))


def _stream(seed: int, key: str) -> tuple:
    digest = hashlib.blake2b(f'timm_pkmixer/v1/{int(seed)}/{key}'.encode(), digest_size=16).digest()
    return np.uint64(int.from_bytes(digest[:8], 'little')), np.uint64(int.from_bytes(digest[8:], 'little'))


def hashed_uniform_keys(num: int, seed: int, key: str) -> np.ndarray:
    """`num` pseudo-random uint64 values of stream (seed, key); identical everywhere (integer arithmetic only)."""
    hi, lo = _stream(seed, key)
    counter = np.arange(num, dtype=np.uint64)
    return _splitmix64(_splitmix64(counter ^ hi) ^ lo)


def structure_digest(array: np.ndarray) -> int:
    """64-bit blake2b fingerprint of an array's bytes, as a signed int64 (it fits a torch buffer)."""
    raw = hashlib.blake2b(np.ascontiguousarray(array).tobytes(), digest_size=8).digest()
    return int.from_bytes(raw, 'little', signed=True)


@dataclass(frozen=True)
class StructureProblem:
    """One problem of a state dict for one structured layer, as a value: the checkpoint check groups and formats
    them (``models/_checkpoint.py``), ``load_state_dict`` reports their messages."""
    key: str                      # the state-dict key at fault
    kind: str                     # 'digest' (another seed or structure), 'dtype', 'type', 'shape', 'explicit'
    message: str                  # the sentence, naming the key
    seed: Optional[int] = None    # kind 'digest': the seed the checkpoint was made with, when found


def _is_to_empty(fn: Any) -> bool:
    """Whether an ``_apply`` function is ``nn.Module.to_empty``'s (new tensors of uninitialised memory)."""
    return getattr(fn, '__qualname__', '').startswith('Module.to_empty.')


class DerivedStructure:
    """Mixin of a module whose frozen structure is derived from (seed, key); the state dict holds its digest.

    A subclass lists it before its nn.Module base, calls :meth:`_init_structure` in ``__init__``, sets the class
    attributes and implements the methods marked below.
    """
    what: str = 'structure'        # 'permutation' / 'mask', for messages
    seed_arg: str = 'seed'         # the model argument that sets the seed ('perm_seed' / 'mask_seed')
    digest_name: str = 'digest'    # the persistent buffer (one int64)
    explicit_name: str = ''        # an explicit array another writer may have stored ('index' / 'mask')
    digest_noun: str = 'digests'   # how a list of mismatching digests is named in messages

    def _init_structure(self, seed: int, key: str, device: Optional[torch.device] = None) -> torch.device:
        """Set seed and key and register the digest buffer; returns the device (torch.device contexts honoured)."""
        self.seed = int(seed)
        self.key = key
        self._digest: Optional[int] = None
        self._materialized = False
        device = torch.empty(0, device=device).device  # honours torch.device(...) contexts
        self.register_buffer(self.digest_name, torch.zeros((), dtype=torch.long, device=device))
        return device

    # ------------------------------------------------------------ to implement

    def _derive_digest(self, seed: int) -> int:
        """Digest of the structure this layer would have with `seed`."""
        raise NotImplementedError

    def _compute_buffers(self) -> None:
        """Fill the non-persistent buffers on their device from (seed, key)."""
        raise NotImplementedError

    def _check_explicit(self, value: torch.Tensor, key: str) -> Optional[str]:
        """A problem with an explicit array found in a state dict (None if it is this layer's)."""
        raise NotImplementedError

    def _buffers_on_meta(self) -> bool:
        raise NotImplementedError

    # ------------------------------------------------------------ shared

    def _apply(self, fn, recurse: bool = True):
        """nn.Module._apply (``to``, ``cuda``, ``half``, ``to_empty``, …) that notes when the derived buffers lose
        their values: on the meta device, or after ``to_empty()`` (torch's own function: uninitialised memory).
        Moves between real devices copy the values and keep the layer usable."""
        result = super()._apply(fn, recurse)
        if self._buffers_on_meta() or _is_to_empty(fn):
            self._materialized = False
        return result

    def expected_digest(self) -> int:
        if self._digest is None:
            self._digest = self._derive_digest(self.seed)
        return self._digest

    @torch.no_grad()
    def init_non_persistent_buffers(self) -> None:
        """(Re)compute the derived buffers and the digest from (seed, key); a no-op on the meta device."""
        if self._buffers_on_meta():
            return
        self._compute_buffers()
        getattr(self, self.digest_name).fill_(self.expected_digest())
        self._materialized = True

    def fingerprint_item(self, name: str) -> str:
        """One line of the model's structure fingerprint (from seed and key: needs no buffer values)."""
        return f'{name}:{self.what}:{self.extra_repr()}:{self.expected_digest()}'

    @torch.jit.unused
    def check_materialized(self) -> None:
        """Raise unless the derived buffers hold the structure (or are on meta: shapes only, nothing computed)."""
        if not self._materialized and not self._buffers_on_meta():
            raise NotMaterializedError(
                f'the {self.what} buffers of this layer ({self.key}) were never computed on this device: the model '
                f'was built on or moved to the meta device, or went through to_empty(), which keep no values. '
                f'Call model.init_non_persistent_buffers() (or model.init_weights()) after to_empty(), or load a '
                f'checkpoint with load_state_dict(sd) (assign=True on the meta device).')

    def find_seed(self, digest: int, limit: int = SEED_SEARCH_LIMIT) -> Optional[int]:
        """The seed in 0..limit-1 whose structure has `digest` (None if none does, within a few seconds)."""
        start = time.perf_counter()
        for seed in range(limit):
            if seed != self.seed and self._derive_digest(seed) == digest:
                return seed
            if time.perf_counter() - start > _SEED_SEARCH_BUDGET_S:
                return None
        return None

    def check_state(self, state_dict: Dict[str, Any], prefix: str, name_seed: bool = True
                    ) -> List[StructureProblem]:
        """Problems of `state_dict` for this layer (at `prefix`), each naming the key; [] if it fits.

        Args:
            state_dict: The state dict being loaded.
            prefix: This layer's prefix in it (e.g. ``'blocks.0.mlp_tokens.perm_in.'``).
            name_seed: On a digest mismatch, search the seed the checkpoint was made with (a few seconds at
                most) and say which.
        """
        problems = []
        explicit_key = prefix + self.explicit_name
        if self.explicit_name and explicit_key in state_dict:
            problem = self._check_explicit(state_dict[explicit_key], explicit_key)
            if problem:
                problems.append(StructureProblem(explicit_key, 'explicit', problem))
        key = prefix + self.digest_name
        if key not in state_dict:
            return problems
        got = state_dict[key]
        if not isinstance(got, torch.Tensor):
            return problems + [StructureProblem(key, 'type', f'{key} is a {type(got).__name__}, not an int64 '
                                                             f'{self.what} digest')]
        if got.is_floating_point() or got.is_complex() or got.dtype == torch.bool:
            return problems + [StructureProblem(
                key, 'dtype',
                f'{key} has dtype {got.dtype}, not int64: the state dict was cast to another dtype, which '
                f'destroys {self.what} digests. Cast only floating-point tensors (model.half() and '
                f'model.to(torch.bfloat16) do that)')]
        if got.numel() != 1:
            return problems + [StructureProblem(key, 'shape', f'{key} has shape {tuple(got.shape)}: a {self.what} '
                                                              f'digest is one int64')]
        if got.is_meta:
            return problems
        value = int(got.reshape(-1)[0])
        if value == self.expected_digest():
            return problems
        seed = self.find_seed(value) if name_seed else None
        if seed is not None:
            problems.append(StructureProblem(
                key, 'digest', seed=seed, message=
                f'{key}: {self.what} digest {value} != {self.expected_digest()} expected for '
                f'{self.seed_arg}={self.seed}: the checkpoint was made with another {self.what} seed, '
                f'{self.seed_arg}={seed}. Build the model with {self.seed_arg}={seed} '
                f'(timm scripts: --model-kwargs {self.seed_arg}={seed})'))
        else:
            searched = f' (not one of 0..{SEED_SEARCH_LIMIT - 1})' if name_seed else ''
            problems.append(StructureProblem(
                key, 'digest', message=
                f'{key}: {self.what} digest {value} != {self.expected_digest()} expected for '
                f'{self.seed_arg}={self.seed}; the checkpoint was made with another {self.what} seed{searched} '
                f'or architecture, or is corrupted'))
        return problems

    def __setattr__(self, name: str, value: Any) -> None:
        """nn.Module's, checking a digest assigned as a whole tensor: loaders that assign the checkpoint's tensors
        instead of calling ``load_state_dict`` (transformers' ``from_pretrained``, which builds the model from
        config.json's ``model_args``; ``load_state_dict(assign=True)``) meet the same check as every other path."""
        if (name == self.digest_name and isinstance(value, torch.Tensor) and not value.is_meta
                and name in self.__dict__.get('_buffers', ())):
            problems = self.check_state({f'{self.key}.{name}': value}, f'{self.key}.')
            if problems:
                raise CheckpointMismatchError(
                    f'the checkpoint assigned to {self.key} does not fit the model built with {self.seed_arg}='
                    f'{self.seed}: {problems[0].message} (a config.json beside the weights must hold the '
                    f'{self.seed_arg} they were trained with)')
        super().__setattr__(name, value)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs) -> None:
        problems = self.check_state(state_dict, prefix, name_seed=False)
        if self.explicit_name:
            state_dict.pop(prefix + self.explicit_name, None)  # checked above, never adopted
        if problems:
            error_msgs.extend(p.message for p in problems)
            return
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)
        if self._buffers_on_meta() and not getattr(self, self.digest_name).is_meta:
            # load_state_dict(..., assign=True) into a meta model: the digest arrived on a real device
            self._move_derived_buffers(getattr(self, self.digest_name).device)
            self.init_non_persistent_buffers()
        elif not self._materialized and not self._buffers_on_meta():
            # after to_empty() (e.g. model.to('meta') and back): the buffers hold uninitialised memory, which a
            # checkpoint does not fill (it holds only the digest): recompute them from (seed, key)
            self.init_non_persistent_buffers()

    def _move_derived_buffers(self, device: torch.device) -> None:
        """Allocate the non-persistent buffers on `device` (they are still on meta)."""
        raise NotImplementedError

"""YAML read safely, for every YAML file the package reads (a run's ``args.yaml``, recipes).

:func:`load_yaml` is ``yaml.safe_load`` (no Python tags) whose aliases may not expand a document beyond
:data:`YAML_MAX_NODES` nodes or refer to a node that contains them: an alias bomb of a few lines otherwise expands
without end wherever the arguments are compared or printed. :func:`yaml_reason` says a YAML error in one line.
"""
from typing import Any, Dict

import yaml

__all__ = ['YAML_MAX_NODES', 'YAMLAliasError', 'load_yaml', 'yaml_reason']

YAML_MAX_NODES = 10_000  # a document's nodes with its aliases expanded (or twice its own nodes, if more)


class YAMLAliasError(yaml.composer.ComposerError):
    """A YAML alias that expands the document beyond :data:`YAML_MAX_NODES` nodes, or refers to its own anchor."""


class _BoundedSafeLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` counting each node's size with its aliases expanded, while composing."""

    def compose_document(self) -> Any:
        self._expanded: Dict[int, int] = {}   # id(node) → its node count, aliases expanded
        return super().compose_document()

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            node = super().compose_node(parent, index)
            if id(node) not in self._expanded:  # its anchor is still being composed: the alias is inside it
                raise YAMLAliasError(None, None, f'the alias *{event.anchor} refers to a node that contains it',
                                     event.start_mark)
            return node
        node = super().compose_node(parent, index)
        if isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        else:
            children = node.value if isinstance(node, yaml.SequenceNode) else []
        size = 1 + sum(self._expanded[id(c)] for c in children)
        if size > max(YAML_MAX_NODES, 2 * len(self._expanded)):
            raise YAMLAliasError(None, None, f'its aliases expand it to more than {YAML_MAX_NODES:,} nodes',
                                 node.start_mark)
        self._expanded[id(node)] = size
        return node


def load_yaml(text: str) -> Any:
    """``yaml.safe_load(text)`` (no Python tags), refusing aliases that expand the document beyond
    :data:`YAML_MAX_NODES` nodes or that refer to their own anchor (:class:`YAMLAliasError`). Raises
    ``yaml.YAMLError``; :func:`yaml_reason` says it in one line."""
    return yaml.load(text, Loader=_BoundedSafeLoader)  # noqa: S506 (a SafeLoader)


def yaml_reason(error: BaseException) -> str:
    """A YAML error in one line: ``ParserError: expected ',' or ']' … at line 2, column 1``."""
    if isinstance(error, yaml.MarkedYAMLError) and error.problem:
        mark = error.problem_mark
        where = f' at line {mark.line + 1}, column {mark.column + 1}' if mark is not None else ''
        context = f'{error.context}: ' if error.context else ''
        return f'{type(error).__name__}: {context}{error.problem}{where}'
    return f'{type(error).__name__}: {" ".join(str(error).split())}'


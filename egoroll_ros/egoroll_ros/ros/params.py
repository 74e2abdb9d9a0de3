"""Declare node parameters once, with descriptors, and validate them at configure time.

Every node lists its parameters as :class:`Param` specs, the one source of its descriptors
(:func:`declare_params`: description, range, read-only), of the validation of every value (at
start-up, from a YAML file for tools (:func:`params_from_yaml`) and when set live), of
docs/parameters.md and of the commented defaults in config/defaults/ (both written by
tools/gen_param_docs.py and checked by a unit test). A parameter the node reads once is
``read_only``; the others are applied live through :func:`watch_live`. Errors are
:class:`~egoroll_ros.errors.ConfigError` naming the parameter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
import math
from pathlib import Path
from typing import Any

from rcl_interfaces.msg import (
    FloatingPointRange,
    IntegerRange,
    ParameterDescriptor,
    SetParametersResult,
)
from rclpy.exceptions import (
    InvalidParameterTypeException,
    InvalidParameterValueException,
    ParameterUninitializedException,
)
from rclpy.node import Node
from rclpy.parameter import Parameter

from egoroll_ros.errors import ConfigError

_TYPES = {
    bool: Parameter.Type.BOOL,
    int: Parameter.Type.INTEGER,
    float: Parameter.Type.DOUBLE,
    str: Parameter.Type.STRING,
    'bool[]': Parameter.Type.BOOL_ARRAY,
    'int[]': Parameter.Type.INTEGER_ARRAY,
    'float[]': Parameter.Type.DOUBLE_ARRAY,
    'str[]': Parameter.Type.STRING_ARRAY,
}


@dataclass(frozen=True)
class Param:
    """One parameter of a node.

    Attributes:
        name: parameter name (dots allowed for groups, e.g. ``checks.max_step``).
        type: ``bool``, ``int``, ``float``, ``str`` or one of ``'bool[]'``, ``'int[]'``,
            ``'float[]'``, ``'str[]'``.
        default: default value; ``None`` makes the parameter required.
        description: what it does, with units.
        min, max: inclusive range for numbers (each element for arrays).
        min_exclusive: the value must be greater than ``min`` (the descriptor's range then
            starts at the next float above it, so ROS refuses ``min`` itself too).
        choices: allowed values for strings.
        read_only: changing it live makes no sense.
        validate: extra check returning an error string or None.
    """

    name: str
    type: Any
    default: Any
    description: str
    min: float | None = None
    max: float | None = None
    choices: Sequence[str] | None = None
    read_only: bool = False
    validate: Callable[[Any], str | None] | None = None
    min_exclusive: bool = False

    def descriptor(self) -> ParameterDescriptor:
        """The ROS parameter descriptor for this spec."""
        desc = ParameterDescriptor(name=self.name, type=_TYPES[self.type].value,
                                   description=self.description, read_only=self.read_only)
        if self.choices:
            desc.additional_constraints = 'one of: ' + ', '.join(self.choices)
        if self.type in (int, 'int[]') and (self.min is not None or self.max is not None):
            desc.integer_range = [IntegerRange(
                from_value=int(self.min if self.min is not None else -2**63),
                to_value=int(self.max if self.max is not None else 2**63 - 1), step=0)]
        elif self.type in (float, 'float[]') and (self.min is not None or self.max is not None):
            low = -math.inf if self.min is None else float(self.min)
            if self.min_exclusive:
                low = math.nextafter(low, math.inf)
            desc.floating_point_range = [FloatingPointRange(
                from_value=low,
                to_value=float(self.max if self.max is not None else math.inf), step=0.0)]
        return desc


def check_value(spec: Param, value: Any) -> Any:
    """Validate one value against its spec and return it normalised.

    Raises:
        ConfigError: naming the parameter and what is wrong with it.
    """
    scalar_types = {bool: bool, int: int, float: float, str: str}
    elem_types = {'bool[]': bool, 'int[]': int, 'float[]': float, 'str[]': str}
    if spec.type in scalar_types:
        if spec.type is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, scalar_types[spec.type]) or (
                spec.type is int and isinstance(value, bool)):
            raise ConfigError(f"parameter '{spec.name}': expected {spec.type.__name__}, "
                              f'got {value!r}')
        items = [value]
    else:
        want = elem_types[spec.type]
        value = list(value)
        if want is float:
            value = [float(v) if isinstance(v, int) and not isinstance(v, bool) else v
                     for v in value]
        for v in value:
            if not isinstance(v, want):
                raise ConfigError(f"parameter '{spec.name}': expected a list of "
                                  f'{want.__name__}, got element {v!r}')
        items = value
    for v in items:
        if isinstance(v, float) and not math.isfinite(v):
            raise ConfigError(f"parameter '{spec.name}': {v!r} is not finite")
        if spec.min is not None and isinstance(v, (int, float)) and spec.min_exclusive and \
                v <= spec.min:
            raise ConfigError(f"parameter '{spec.name}': must be > {spec.min:g}, got {v!r}")
        if spec.min is not None and isinstance(v, (int, float)) and v < spec.min:
            raise ConfigError(f"parameter '{spec.name}': {v!r} is below the minimum {spec.min}")
        if spec.max is not None and isinstance(v, (int, float)) and v > spec.max:
            raise ConfigError(f"parameter '{spec.name}': {v!r} is above the maximum {spec.max}")
        if spec.choices is not None and v not in spec.choices:
            raise ConfigError(f"parameter '{spec.name}': {v!r} is not one of "
                              f"{', '.join(spec.choices)}")
    if spec.validate is not None:
        problem = spec.validate(value)
        if problem:
            raise ConfigError(f"parameter '{spec.name}': {problem}")
    return value


def declare_params(node: Node, specs: Iterable[Param]) -> dict[str, Any]:
    """Declare every spec on ``node`` and return ``{name: validated value}``.

    Raises:
        ConfigError: a required parameter is missing, or a value has the wrong type or range.
    """
    values: dict[str, Any] = {}
    for spec in specs:
        ptype = _TYPES[spec.type]
        try:
            if spec.default is None or (isinstance(spec.default, list) and not spec.default):
                node.declare_parameter(spec.name, ptype, spec.descriptor())
            else:
                node.declare_parameter(spec.name, spec.default, spec.descriptor())
            value = node.get_parameter(spec.name).value
        except ParameterUninitializedException:
            if spec.default is None:
                raise ConfigError(f"parameter '{spec.name}' is required: {spec.description}") \
                    from None
            value = list(spec.default)
        except InvalidParameterTypeException as exc:
            raise ConfigError(f"parameter '{spec.name}': wrong type ({exc})") from None
        except InvalidParameterValueException as exc:
            raise ConfigError(f"parameter '{spec.name}': invalid value ({exc})") from None
        if value is None:
            if spec.default is None:
                raise ConfigError(f"parameter '{spec.name}' is required: {spec.description}")
            value = spec.default
        values[spec.name] = check_value(spec, value)
    return values


def watch_live(node: Node, specs: Iterable[Param], values: dict[str, Any],
               apply: Callable[[dict[str, Any]], None]) -> None:
    """Apply the live (not ``read_only``) parameters of ``specs`` when they are set.

    Registers an on-set-parameters callback (call it after :func:`declare_params`): each
    changed value is validated by :func:`check_value` (rclpy has already refused read-only
    parameters and values outside the descriptor's range), then ``apply(changes)`` carries the
    changes out; when either raises :class:`~egoroll_ros.errors.ConfigError` the whole set is
    refused with its message as the reason (``ros2 param set`` prints it) and nothing changes.
    On success ``values`` (the node's validated parameters) is updated.

    Args:
        node: the node the specs were declared on.
        specs: its parameter specs.
        values: the dict :func:`declare_params` returned.
        apply: carries out ``{name: validated value}``; raises ConfigError to refuse.
    """
    live = {s.name: s for s in specs if not s.read_only}

    def on_set(params: list[Parameter]) -> SetParametersResult:
        changes: dict[str, Any] = {}
        try:
            for prm in params:
                spec = live.get(prm.name)
                if spec is not None:
                    changes[spec.name] = check_value(spec, prm.value)
            if changes:
                apply(changes)
        except ConfigError as exc:
            return SetParametersResult(successful=False, reason=str(exc))
        values.update(changes)
        return SetParametersResult(successful=True)

    node.add_on_set_parameters_callback(on_set)


def per_joint(values: Sequence[float], joints: Sequence[str], name: str) -> list[float]:
    """Check that a per-joint parameter has exactly one value per joint.

    Raises:
        ConfigError: naming the parameter, the expected and the actual length.
    """
    if len(values) != len(joints):
        raise ConfigError(f"parameter '{name}': needs one value per joint ({len(joints)}: "
                          f"{', '.join(joints)}), got {len(values)}")
    return list(values)


def _flatten(tree: dict, prefix: str = '') -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(_flatten(value, f'{prefix}{key}.'))
        else:
            out[f'{prefix}{key}'] = value
    return out


def yaml_values(path: str | Path, node_name: str, specs: Iterable[Param], names: Iterable[str],
                namespace: str = '') -> dict[str, Any] | None:
    """Some parameters a node ``namespace/node_name`` would get from a ``--params-file`` YAML:
    each of ``names`` as given there, else its default, checked like :func:`declare_params`
    (the rest of the section is not looked at). None when the file has no section for the node.

    Raises:
        ConfigError: unreadable file, or a bad value (naming the parameter and the file).
    """
    import yaml

    from egoroll_ros.core.launch_graph import node_parameters

    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f'cannot read parameters file {path}: {exc}') from None
    section = node_parameters(data, node_name, namespace)
    if section is None:
        return None
    given = _flatten(section)
    by_name = {s.name: s for s in specs}
    out: dict[str, Any] = {}
    for name in names:
        spec = by_name[name]
        value = given.get(name, spec.default)
        try:
            out[name] = check_value(spec, value)
        except ConfigError as exc:
            raise ConfigError(f'{path}: {exc}') from None
    return out


def params_from_yaml(path: str | Path | None, node_name: str, specs: Iterable[Param],
                     overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The validated parameter values a node would get from a ``--params-file`` YAML.

    For tools that use a node's configuration without running the node (``egoroll
    evaluate``): reads every section matching ``/<node_name>`` (``/**/<node_name>``, ``/**``,
    ...), applies the specs' defaults, then ``overrides``, and validates like
    :func:`declare_params`.

    Raises:
        ConfigError: unreadable file, no section for the node, a key the node does not
            declare, a missing required parameter, or a bad value (naming the parameter).
    """
    import yaml

    specs = list(specs)
    given: dict[str, Any] = {}
    if path is not None:
        try:
            data = yaml.safe_load(Path(path).read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f'cannot read parameters file {path}: {exc}') from None
        from egoroll_ros.core.launch_graph import node_parameters

        section = node_parameters(data, node_name)
        if section is None:
            raise ConfigError(f"{path}: no '/**/{node_name}: ros__parameters:' section (nor "
                              f"any other key matching /{node_name})")
        given = _flatten(section)
    given.update(overrides or {})
    known = {s.name for s in specs}
    unknown = sorted(set(given) - known)
    if unknown:
        raise ConfigError(f"{path}: {node_name} has no parameter {', '.join(map(repr, unknown))}")
    values: dict[str, Any] = {}
    for spec in specs:
        if spec.name in given and given[spec.name] is not None:
            value = given[spec.name]
        elif spec.default is None:
            raise ConfigError(f"parameter '{spec.name}' is required: {spec.description}")
        else:
            value = list(spec.default) if isinstance(spec.default, list) else spec.default
        values[spec.name] = check_value(spec, value)
    return values

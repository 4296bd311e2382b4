"""The policy registry: one for both worlds.

utilon has two worlds of jobs.  In the *slot* world (the scheduler core: every baseline and
CORA, RDS, RAS, alsched) jobs are stages of tasks granted resources on machines; its interface
(``Policy``, ``EVENT_TRIGGERS``) belongs to the core (``utilon.core.policy``) and is
re-exported here for policy authors.  In the *cloud* world (Cura's §4.1 services) jobs are
moldable clusters of VMs drawn from pools on servers; its interface is
``utilon.cloud.policy.CloudPolicy``.  Every policy class says which world it is from
(``world``) and is registered here by name with ``@register``.  Names are unique across both
worlds, so asking for a policy of the other world is a one-line error that says where it runs.

``make_policy`` / ``make_cloud_policy`` build one from a name and a parameter mapping,
validating the parameters against the constructor's signature and types so that a typo gives a
one-line error that lists what is accepted.

A name is looked up in this order: a built-in (``BUILTINS``) or a class registered in this
process (``@register``); a reference ``package.module:Class``; an installed package's
``utilon.policies`` entry point (``utilon.plugins``).  The last two are found only when a name
is not built in, so the built-ins never pay for them.  A name is what every process of a run is
handed (``compare``'s workers, Ray tasks re-resolve it), never the class, so a reference or an
installed plugin works everywhere a built-in does.  ``policy_names`` (and so ``--policies all``)
stays the built-ins plus what this process registered: installing a package does not change
what ``all`` compares; ``plugin_policies`` lists the installed plugins.
"""

from __future__ import annotations

import importlib
import inspect
import typing
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from pydantic import TypeAdapter
from pydantic import ValidationError as PydanticValidationError

from utilon.core.policy import EVENT_TRIGGERS, Policy
from utilon.errors import ParameterError, UnknownNameError
from utilon.plugins import PluginError, is_reference, load, load_all, resolve_reference

if TYPE_CHECKING:  # Cura's world is loaded when a cloud policy is first asked for (below)
    from utilon.cloud.policy import CloudPolicy

__all__ = ["BUILTINS", "DEFAULT_ALIAS", "DEFAULT_POLICY", "EVENT_TRIGGERS", "WORLDS",
           "CloudPolicy", "P", "Policy", "canonical", "cloud_policy_class", "load_builtins",
           "make_cloud_policy", "make_policy", "origin", "plugin_policies", "policy_class",
           "policy_names", "policy_parameters", "register", "world_of"]

WORLDS = {"slot": "tasks granted resources on machines (the scheduler core)",
          "cloud": "moldable jobs on VM clusters from pools on servers (Cura's world)"}
_REGISTRY: dict[str, type[Policy] | type[CloudPolicy]] = {}
P = TypeVar("P", bound="type[Policy] | type[CloudPolicy]")

#: The built-in policies: name -> (world, the module whose import registers it).  A module is
#: imported the first time one of its policies is asked for, so listing names (``--help``, an
#: unknown-name error, ``validate``) imports none of them (they pull in scipy, HiGHS, ...);
#: ``tests/test_policies.py`` holds this table to what the modules register.
BUILTINS: dict[str, tuple[str, str]] = {
    "alsched": ("slot", "utilon.policies.alsched.policy"),
    "cora": ("slot", "utilon.policies.cora.policy"),
    "cora-ct": ("slot", "utilon.policies.cora.policy"),
    "cora-lp": ("slot", "utilon.policies.cora.policy"),
    "edf-n": ("slot", "utilon.policies.edf"),
    "edf-p": ("slot", "utilon.policies.edf"),
    "fair": ("slot", "utilon.policies.fair"),
    "fair-slots": ("slot", "utilon.policies.fair"),
    "fifo": ("slot", "utilon.policies.fifo"),
    "ras": ("slot", "utilon.policies.ras.policy"),
    "rds": ("slot", "utilon.policies.rds.policy"),
    "rrh": ("slot", "utilon.policies.rrh"),
    "triage": ("slot", "utilon.policies.triage"),
    "cura": ("cloud", "utilon.policies.cura.reconfig"),
    "cura-capacity": ("cloud", "utilon.policies.cura.reconfig"),
    "dedicated": ("cloud", "utilon.policies.cura.baselines"),
    "per-job-cluster": ("cloud", "utilon.policies.cura.baselines"),
    "per-job-opt": ("cloud", "utilon.policies.cura.baselines"),
    "vm-aware": ("cloud", "utilon.policies.cura.vmaware"),
}


#: What ``--policy default`` (and every command's default) runs: utilon's own policy.
DEFAULT_POLICY = "triage"
DEFAULT_ALIAS = "default"


def canonical(name: str) -> str:
    """The registered name ``name`` stands for (``default`` is utilon's own policy)."""
    return DEFAULT_POLICY if name == DEFAULT_ALIAS else name


def load_builtins() -> None:
    """Import every built-in policy module (``utilon policies`` describes them all)."""
    for _, module in BUILTINS.values():
        importlib.import_module(module)


PolicyClass: TypeAlias = "type[Policy] | type[CloudPolicy]"
#: Classes found by a ``module:Class`` reference, by the reference.
_REFERENCES: dict[str, PolicyClass] = {}
PLUGIN_GROUP = "utilon.policies"


def _registered(name: str) -> PolicyClass | None:
    """The class ``name`` stands for, or None for an unknown name; a reference or a plugin
    that cannot be loaded raises ``PluginError`` (its one line says why)."""
    name = canonical(name)
    cls = _REGISTRY.get(name)
    if cls is None and name in BUILTINS:
        importlib.import_module(BUILTINS[name][1])
        cls = _REGISTRY.get(name)
    if cls is None and is_reference(name):
        cls = _reference(name)
    elif cls is None:
        cls = load(PLUGIN_GROUP, name, _plugin_problem)
    return cls


def _not_a_policy(obj: Any) -> str | None:
    from utilon.cloud.policy import CloudPolicy

    if not (isinstance(obj, type) and issubclass(obj, Policy | CloudPolicy)):
        what = getattr(obj, "__qualname__", None) or repr(obj)
        return (f"{what} is not a policy class (a subclass of utilon.policies.Policy, or of "
                "CloudPolicy for the cloud world)")
    if not isinstance(getattr(obj, "name", None), str) or not obj.name:
        return f"policy class {obj.__qualname__} has no name (set the class attribute name)"
    if obj.world not in WORLDS:
        return f"policy {obj.name!r}: unknown world {obj.world!r}"
    return None


def _plugin_problem(name: str, obj: Any) -> str | None:
    if name in BUILTINS:
        return f"{name!r} is a built-in policy's name; the built-in is used"
    problem = _not_a_policy(obj)
    if problem is None and obj.name != name:
        # the name a run is asked for is the name its summary reports
        problem = f"the entry point is named {name!r} but the policy's name is {obj.name!r}"
    if problem is None:
        try:
            _parameters(obj)
        except PluginError as e:
            problem = e.message
    return problem


def _reference(ref: str) -> PolicyClass:
    cls = _REFERENCES.get(ref)
    if cls is None:
        obj = resolve_reference(ref, what="policy")
        problem = _not_a_policy(obj)
        if problem is not None:
            raise PluginError(f"policy {ref!r}: {problem}",
                              fix="name a class that subclasses utilon.policies.Policy")
        _parameters(obj)  # hints that do not resolve: one line now, not a traceback later
        cls = _REFERENCES[ref] = obj
    return cls


def plugin_policies(world: str | None = None) -> dict[str, tuple[PolicyClass, str]]:
    """The installed plugins' policies (of ``world``, or of both): name -> (class, the
    distribution it comes from).  A broken plugin is a logged warning, and left out."""
    return {n: (cls, p.dist) for n, (cls, p) in sorted(load_all(PLUGIN_GROUP,
                                                                _plugin_problem).items())
            if n not in BUILTINS and (world is None or cls.world == world)}


def origin(name: str) -> str:
    """Where policy ``name`` comes from: ``utilon`` (built in), the distribution of an
    installed plugin, the module that registered it in this process, or ``reference``."""
    name = canonical(name)
    if name in BUILTINS:
        return "utilon"
    if name in _REGISTRY:
        return _REGISTRY[name].__module__
    if is_reference(name):
        return "reference"
    found = plugin_policies().get(name)
    return found[1] if found is not None else ""


def register(cls: P) -> P:
    """Class decorator: make the policy available under ``cls.name`` (in its ``world``)."""
    if cls.name in _REGISTRY:
        raise ValueError(f"policy {cls.name!r} registered twice")
    if cls.world not in WORLDS:
        raise ValueError(f"policy {cls.name!r}: unknown world {cls.world!r}")
    _REGISTRY[cls.name] = cls
    return cls


def policy_names(world: str = "slot") -> list[str]:
    """The policies of ``world`` (built in, and registered by other code), sorted."""
    return sorted({n for n, (w, _) in BUILTINS.items() if w == world}
                  | {n for n, c in _REGISTRY.items() if c.world == world})


def world_of(name: str) -> str | None:
    """The world a policy runs in, or ``None`` for an unknown name (or one that does not
    load: asking for its class says why)."""
    name = canonical(name)
    if name in _REGISTRY:
        return _REGISTRY[name].world
    if name in BUILTINS:
        return BUILTINS[name][0]
    try:
        cls = _registered(name)
    except PluginError:
        return None
    return None if cls is None else cls.world


def _lookup(name: str, world: str) -> Any:
    cls = _registered(name)
    if cls is None:
        raise UnknownNameError("policy", name, policy_names(world),
                               fix="run `utilon policies` to see them")
    if cls.world != world:
        kind = "a slot-world policy" if cls.world == "slot" else "a cloud service"
        section = "cluster:" if cls.world == "slot" else "cloud:"
        raise UnknownNameError("policy", name, policy_names(world),
                               fix=f"{name!r} is {kind}; it runs on scenarios with a "
                                   f"{section} section (see `utilon policies`)")
    return cls


def policy_class(name: str) -> type[Policy]:
    """The registered slot-world policy class ``name``."""
    cls: type[Policy] = _lookup(name, "slot")
    return cls


def cloud_policy_class(name: str) -> type[CloudPolicy]:
    """The registered cloud service class ``name``."""
    cls: type[CloudPolicy] = _lookup(name, "cloud")
    return cls


def policy_parameters(name: str) -> dict[str, tuple[Any, Any]]:
    """{parameter: (type, default)} of a registered policy's constructor, of either world (a
    cloud service's profile store is what it runs on, not a parameter)."""
    return _parameters(_registered(name) or policy_class(name))


def _parameters(cls: PolicyClass) -> dict[str, tuple[Any, Any]]:
    try:
        hints = typing.get_type_hints(cls.__init__)
    except Exception as e:  # a plugin's hint naming what its module imports only for mypy
        raise PluginError(f"policy {cls.name!r}: its constructor's type hints do not resolve "
                          f"({type(e).__name__}: {e})",
                          fix="import the types the hints name at run time") from None
    out: dict[str, tuple[Any, Any]] = {}
    for pname, p in inspect.signature(cls.__init__).parameters.items():
        if pname in ("self", "store") or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
            continue
        out[pname] = (hints.get(pname, Any), p.default)
    return out


def make_policy(name: str, params: Mapping[str, Any] | None = None, *, where: str = "") -> Policy:
    """Build a registered slot-world policy, validating ``params`` against its constructor."""
    try:
        cls = policy_class(name)
    except (UnknownNameError, PluginError) as e:
        e.where = where or e.where
        raise
    policy: Policy = _build(cls, canonical(name), (), params, where)
    return policy


def make_cloud_policy(name: str, store: Any, params: Mapping[str, Any] | None = None, *,
                      where: str = "") -> CloudPolicy:
    """Build a registered cloud service on the profile store ``store``, validating ``params``
    against its constructor."""
    try:
        cls = cloud_policy_class(name)
    except (UnknownNameError, PluginError) as e:
        e.where = where or e.where
        raise
    policy: CloudPolicy = _build(cls, canonical(name), (store,), params, where)
    return policy


def _build(cls: Any, name: str, args: tuple[Any, ...], params: Mapping[str, Any] | None,
           where: str) -> Any:
    """One policy, its parameters checked the same way whoever wrote it: against the
    constructor's signature and type hints (pydantic), then by the constructor itself."""
    accepted = _parameters(cls)
    kwargs: dict[str, Any] = {}
    for key, value in (params or {}).items():
        if key not in accepted:
            listing = ", ".join(sorted(accepted)) or "none"
            raise ParameterError(f"policy {name!r} has no parameter {key!r}; it accepts: "
                                 f"{listing}", where=where)
        typ, _ = accepted[key]
        try:
            kwargs[key] = TypeAdapter(typ).validate_python(value)
        except PydanticValidationError as exc:
            msg = exc.errors()[0]["msg"]
            raise ParameterError(f"policy {name!r}: parameter {key!r}={value!r}: {msg}",
                                 where=where) from None
    missing = [k for k, (_, d) in accepted.items() if d is inspect.Parameter.empty
               and k not in kwargs]
    if missing:
        raise ParameterError(f"policy {name!r} needs parameter(s): {', '.join(missing)}",
                             where=where)
    try:
        return cls(*args, **kwargs)
    except ValueError as exc:
        raise ParameterError(f"policy {name!r}: {exc}", where=where) from None


def __getattr__(name: str) -> Any:
    """``CloudPolicy`` (re-exported for policy authors) is imported when first asked for: a
    slot-world command (``utilon validate``, ``simulate``) never loads Cura's world (issue 47,
    tests/test_startup.py)."""
    if name == "CloudPolicy":
        from utilon.cloud.policy import CloudPolicy

        return CloudPolicy
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

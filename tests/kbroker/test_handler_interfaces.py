"""Handlers use their node only through kbroker/handlers/interfaces.py, and the nodes provide it.

An AST scan starts at every registered handler (a broker's listeners' and a controller's) and collects the
attributes read on its first parameter, the node. Where the node is passed on to a function it can name
(a helper here, ``allowed`` in security/, ``verify_in_transaction`` in txn/, a dataclass that keeps it, a
method of a member whose type the protocols give, a function handed to ``start_soon`` with it), that
function is scanned in turn for its own parameter. Branches on ``node.forwards`` are followed as the node
takes them: a broker forwards a metadata change before it would plan one (handlers/metadata_change.py).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pathlib
import textwrap
import types
import typing
from dataclasses import dataclass, field

import pytest

from kbroker.broker import Broker, BrokerSettings, plaintext_listener
from kbroker.config import BrokerConfig
from kbroker.controller.handlers import CONTROLLER_HANDLERS
from kbroker.handlers import HANDLERS, interfaces
from kbroker.log.partition_log import Log
from kbroker.replication.replica import Partition

HANDLERS_FOLDER = pathlib.Path(interfaces.__file__).parent
NODE_PARAMETERS = ("broker", "owner", "controller")  # what the handlers and their helpers call their node
PROBES = ("getattr", "hasattr", "setattr", "vars")


def members(protocol: type) -> set[str]:
    """The members a protocol names, its bases' included."""
    names: set[str] = set()
    for part in protocol.__mro__:
        if part in (typing.Protocol, typing.Generic, object) or not getattr(part, "_is_protocol", False):
            continue
        names.update(name for name in vars(part) if not name.startswith("_"))
        names.update(name for name in getattr(part, "__annotations__", {}) if not name.startswith("_"))
    return names


def member_type(protocol: type, name: str):
    """The class a protocol gives its member ``name`` (a property's return type), or None."""
    for part in protocol.__mro__:
        declared = vars(part).get(name)
        if isinstance(declared, property):
            kind = typing.get_type_hints(declared.fget).get("return")
            return kind if isinstance(kind, type) else None
    return None


# -- the scan -----------------------------------------------------------------------------------------------


@dataclass
class Reads:
    where: dict[str, set[str]] = field(default_factory=dict)  # member -> the functions that read it
    unresolved: set[str] = field(default_factory=set)  # calls passing the node on that the scan cannot follow
    probes: set[str] = field(default_factory=set)  # getattr(node, ...) and its kin
    scanned: set = field(default_factory=set)
    functions: set = field(default_factory=set)  # the code objects scanned


def _definition(function) -> ast.FunctionDef | ast.AsyncFunctionDef:
    node = ast.parse(textwrap.dedent(inspect.getsource(function))).body[0]
    assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)), function
    return node


def _is_path(node: ast.AST, path: tuple[str, ...]) -> bool:
    """Whether ``node`` is the expression ``path`` names: ("broker",) or ("self", "broker")."""
    for name in reversed(path[1:]):
        if not (isinstance(node, ast.Attribute) and node.attr == name):
            return False
        node = node.value
    return isinstance(node, ast.Name) and node.id == path[0]


class _Scan:
    def __init__(self, reads: Reads, function, path, node_protocol, constants: dict, bound: dict) -> None:
        self.reads, self.path, self.node_protocol, self.constants = reads, path, node_protocol, constants
        self.where = f"{function.__module__}.{function.__qualname__}"
        self.names = {**function.__globals__, **inspect.getclosurevars(function).nonlocals, **bound}
        owner = function.__qualname__.rpartition(".")[0]
        if owner and "<locals>" not in owner:  # a method: ``self`` is its class
            self.names.setdefault("self", function.__globals__.get(owner))

    def statements(self, body: list[ast.stmt]) -> None:
        for statement in body:
            branch = self._taken(statement)
            if branch is None:
                self.visit(statement)
                continue
            self.statements(branch)
            if branch and isinstance(branch[-1], (ast.Return, ast.Raise)):
                return  # the rest of the block is never reached on this node

    def _taken(self, statement: ast.stmt) -> list[ast.stmt] | None:
        """The branch an ``if node.<constant>:`` takes on this node; None for any other statement."""
        if not isinstance(statement, ast.If):
            return None
        test, negated = statement.test, False
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test, negated = test.operand, True
        if not (isinstance(test, ast.Attribute) and _is_path(test.value, self.path) and test.attr in self.constants):
            return None
        self.read(test.attr)
        return statement.body if bool(self.constants[test.attr]) != negated else statement.orelse

    def read(self, member: str) -> None:
        self.reads.where.setdefault(member, set()).add(self.where)

    def visit(self, node: ast.AST) -> None:
        if isinstance(node, ast.Attribute) and _is_path(node.value, self.path):
            self.read(node.attr)
        if isinstance(node, ast.Call):
            self.call(node)
        for _, value in ast.iter_fields(node):
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                self.statements(value)
            elif isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST):
                        self.visit(item)
            elif isinstance(value, ast.AST):
                self.visit(value)

    def resolve(self, expression: ast.expr):
        """The object a callee's expression names here, or None."""
        if isinstance(expression, ast.Name):
            return self.names.get(expression.id)
        if not isinstance(expression, ast.Attribute):
            return None
        if isinstance(expression.value, ast.Attribute) and _is_path(expression.value.value, self.path):
            kind = member_type(self.node_protocol, expression.value.attr)  # node.<member>.<method>
            return getattr(kind, expression.attr, None)
        owner = self.resolve(expression.value)
        return getattr(owner, expression.attr, None) if isinstance(owner, (types.ModuleType, type)) else None

    def call(self, call: ast.Call) -> None:
        passed = [(index, None) for index, argument in enumerate(call.args) if _is_path(argument, self.path)]
        passed += [(None, keyword.arg) for keyword in call.keywords if _is_path(keyword.value, self.path)]
        if not passed:
            return
        if isinstance(call.func, ast.Name) and call.func.id in PROBES:
            self.reads.probes.add(f"{self.where}: {ast.unparse(call)}")
            return
        own_member = isinstance(call.func, ast.Attribute) and _is_path(call.func.value, self.path)
        callee = None if own_member else self.resolve(call.func)
        if callee is None:
            handed = self.resolve(call.args[0]) if call.args else None
            if inspect.isfunction(handed) and all(index != 0 for index, _ in passed):
                # start_soon(function, node): the function runs with the node
                shifted = [(None if index is None else index - 1, keyword) for index, keyword in passed]
                self.follow(handed, call.args[1:], shifted)
            elif not own_member:
                self.reads.unresolved.add(f"{self.where}: {ast.unparse(call.func)}(...)")
        elif isinstance(callee, type):  # an object keeping the node: its methods read it as self.<field>
            parameters = list(inspect.signature(callee).parameters)
            source = inspect.getsourcefile(callee)
            for index, keyword in passed:
                for _, method in inspect.getmembers(callee, inspect.isfunction):
                    if method.__code__.co_filename == source:
                        scan(self.reads, method, ("self", keyword or parameters[index]), self.node_protocol,
                             self.constants)
        else:
            self.follow(callee, call.args, passed)

    def follow(self, callee, arguments: list[ast.expr], passed) -> None:
        """Scan ``callee`` for the parameters the node is passed as; functions it is given are known there."""
        function = inspect.unwrap(callee)
        parameters = list(inspect.signature(function).parameters)
        skip = 1 if parameters and parameters[0] == "self" else 0
        bound = {}
        for position, argument in enumerate(arguments):
            value = self.resolve(argument) if isinstance(argument, (ast.Name, ast.Attribute)) else None
            if inspect.isfunction(value) and position + skip < len(parameters):
                bound[parameters[position + skip]] = value
        for index, keyword in passed:
            scan(self.reads, function, (keyword or parameters[index + skip],), self.node_protocol, self.constants,
                 bound)


def scan(reads: Reads, function, path: tuple[str, ...], node_protocol: type, constants: dict,
         bound: dict | None = None) -> Reads:
    key = (function, path, tuple(sorted(constants.items())),
           tuple(sorted((name, id(value)) for name, value in (bound or {}).items())))
    if key not in reads.scanned:
        reads.scanned.add(key)
        reads.functions.add(function.__code__)
        _Scan(reads, function, path, node_protocol, constants, bound or {}).statements(_definition(function).body)
    return reads


def handler_reads(registry, node_protocol: type, constants: dict) -> Reads:
    """What the handlers of ``registry`` read of their node, given the node's ``constants``."""
    reads = Reads()
    for handler in registry.values():
        node = next(iter(inspect.signature(handler.handle).parameters))
        scan(reads, handler.handle, (node,), node_protocol, constants)
    return reads


BROKER = {"forwards": True}  # the constants the scan takes branches by
CONTROLLER = {"forwards": False}


@pytest.fixture(scope="module")
def broker_reads() -> Reads:
    return handler_reads(HANDLERS, interfaces.HandlerNode, BROKER)


@pytest.fixture(scope="module")
def controller_reads() -> Reads:
    return handler_reads(CONTROLLER_HANDLERS, interfaces.ControllerNode, CONTROLLER)


def _listed(reads: Reads, names) -> str:
    return "; ".join(f"{name} (read in {', '.join(sorted(reads.where[name]))})" for name in sorted(names))


# -- the protocols name exactly what the handlers read --------------------------------------------------------


def test_every_member_a_broker_s_handlers_read_is_named_in_handler_node(broker_reads):
    unnamed = set(broker_reads.where) - members(interfaces.HandlerNode)
    assert not unnamed, f"not in kbroker/handlers/interfaces.py's HandlerNode: {_listed(broker_reads, unnamed)}"


def test_every_member_a_controller_s_handlers_read_is_named_in_controller_node(controller_reads):
    unnamed = set(controller_reads.where) - members(interfaces.ControllerNode)
    assert not unnamed, f"not in ControllerNode: {_listed(controller_reads, unnamed)}"


def test_the_protocols_name_nothing_the_handlers_do_not_read(broker_reads, controller_reads):
    unread = members(interfaces.HandlerNode) - set(broker_reads.where)
    assert not unread, f"HandlerNode names members no handler on a broker reads: {sorted(unread)}"
    unread = members(interfaces.ControllerNode) - set(controller_reads.where)
    assert not unread, f"ControllerNode names members no handler on a controller reads: {sorted(unread)}"


def test_no_handler_probes_its_node(broker_reads, controller_reads):
    """What a node has is typed in the protocols; a handler does not ask whether it has it."""
    probes = broker_reads.probes | controller_reads.probes
    assert not probes, f"probing the node: {sorted(probes)}"


def test_the_scan_follows_every_call_that_passes_the_node_on(broker_reads, controller_reads):
    unresolved = broker_reads.unresolved | controller_reads.unresolved
    assert not unresolved, f"the node is passed to what the scan cannot name: {sorted(unresolved)}"


def test_the_scan_reaches_every_function_of_the_handlers_that_takes_a_node(broker_reads, controller_reads):
    """A helper the scan never reached would read its node unchecked."""
    reached = broker_reads.functions | controller_reads.functions
    missed = []
    for path in sorted(HANDLERS_FOLDER.glob("[!_]*.py")):
        module = importlib.import_module(f"kbroker.handlers.{path.stem}")
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or not node.args.args:
                continue
            first = node.args.args[0].arg
            if first in NODE_PARAMETERS and not any(code.co_filename == module.__file__ and
                                                     code.co_firstlineno in _lines_of(node) for code in reached):
                missed.append(f"{path.name}:{node.lineno} {node.name}")
    assert not missed, f"functions taking a node that no handler's scan reached: {missed}"


def _lines_of(node: ast.AST) -> range:
    """The lines a definition may start on (its decorators', then its own)."""
    first = min([node.lineno, *(decorator.lineno for decorator in node.decorator_list)])
    return range(first, node.lineno + 1)


def test_the_scan_sees_what_it_claims_to():
    """Reads through a helper, a kept dataclass, a member's method and start_soon; the forwards branch."""
    reads = handler_reads(HANDLERS, interfaces.HandlerNode, BROKER)
    assert "kbroker.handlers.partition_guard.TopicGuard.local" in reads.where["leads"]  # kept by TopicGuard
    assert "kbroker.security.authorization.allowed" in reads.where["authorization"]
    assert "kbroker.producer_ids.ProducerIdBlock._fetch" in reads.where["allocate_producer_ids"]  # via start_soon
    assert "kbroker.txn.remote.verify_with_coordinator" in reads.where["peers"]
    assert "submit" not in reads.where and "write_lock" not in reads.where  # a broker forwards first
    assert "submit" in handler_reads(HANDLERS, interfaces.HandlerNode, {}).where


def _reads_a_secret(node):
    return node.secret


async def _probing_handler(broker, context, request):
    return getattr(broker, "hidden", None), _reads_a_secret(broker)


def test_the_scan_catches_a_probe_and_a_read_through_a_helper():
    reads = scan(Reads(), _probing_handler, ("broker",), interfaces.HandlerNode, BROKER)
    assert reads.where == {"secret": {f"{__name__}._reads_a_secret"}}
    assert reads.probes == {f"{__name__}._probing_handler: getattr(broker, 'hidden', None)"}


# -- the nodes provide what their listeners' handlers need ---------------------------------------------------


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    made = Broker(BrokerSettings(listeners=plaintext_listener("127.0.0.1", 0),
                                 data_dir=str(tmp_path_factory.mktemp("broker"))), BrokerConfig.from_mapping({}))
    yield made
    made.directories.release()


def test_a_broker_has_every_member_of_handler_node(broker):
    missing = sorted(name for name in members(interfaces.HandlerNode) if not hasattr(broker, name))
    assert not missing, f"Broker lacks {missing}"
    assert broker.forwards is True


def test_a_controller_has_every_member_of_controller_node(broker):
    controller = broker.quorum  # a single node's sole voter: the same Controller a cluster's controllers are
    missing = sorted(name for name in members(interfaces.ControllerNode) if not hasattr(controller, name))
    assert not missing, f"Controller lacks {missing}"
    assert controller.forwards is False


def test_a_partition_replica_has_every_member_the_handlers_use_of_one(tmp_path):
    partition = Partition("events", 0, Log.open(str(tmp_path / "events-0")), flusher=None)
    missing = sorted(name for name in members(interfaces.PartitionReplica) if not hasattr(partition, name))
    assert not missing, f"kbroker/replication/replica.py's Partition lacks {missing}"

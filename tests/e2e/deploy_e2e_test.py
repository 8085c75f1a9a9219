#!/usr/bin/env python3
"""The deployment files under deploy/ checked as users deploy them.

  --case kubernetes   deploy/kubernetes/*.yaml: every document parses (PyYAML) and passes a
                      structural check (Debian has no Kubernetes schema checker: no kubeconform,
                      no kubeval, and its kubectl 1.20 validates only against a live API server):
                      known apiVersion/kind, workload selectors matching their pod templates,
                      Services, NetworkPolicies and the PodDisruptionBudget selecting real pods
                      and naming real ports, every Secret/ConfigMap a container refers to (and
                      its key) present, every FT_* variable a setting of common/config_table.def,
                      every ftworker/ftmaster command line made of the flags and subcommands the
                      real binaries' --help lists, every $(VAR) defined where Kubernetes expands
                      it, no secret-sourced variable in any command line; and what the deployment
                      needs: the worker with hostPID and the node's /dev/shm, the training pods
                      likewise, with the worker's uid, its node id and job name, libft.so where
                      LD_PRELOAD says; metrics on the pod's address (never 0.0.0.0); containers
                      without capabilities or privilege escalation; resources requested;
                      kustomization.yaml listing every file but the example.
  --case kubernetes-run
                      the manifests' containers run here as their pods would run them: the Redis
                      StatefulSet's start script with a password from the Secret (the placeholder
                      or a short one refused; answering only with it; its config file 0600;
                      bound to the pod's address and loopback only), the two ftmaster replicas
                      (one leads, the other takes over when it is killed), the ftworker
                      DaemonSet's command and environment (transfer endpoint and /metrics on the
                      pod's address; the password in no argument and no log), and a
                      rank with the training Job's environment (trainsim standing in for
                      torchrun) that its worker adopts on the node named by spec.nodeName and
                      that restores from that worker's plan. Pod addresses are loopback
                      addresses (127.0.0.2...); the secret's values are this test's Redis's.
  --case systemd      deploy/systemd/*.service: `systemd-analyze verify` (the ExecStart binaries
                      pointed at this build), `systemd-analyze security --offline` under an
                      exposure threshold, ExecStart flags against --help, what the worker must
                      keep (no PrivateDevices, RemoveIPC=no, a non-root User) and the env
                      examples' keys FT_* settings.
  --case slurm        a one-node Slurm from Debian's packages (munged, slurmctld, slurmd in a
                      temporary directory, this test's slurm.conf with Prolog= and Epilog= set to
                      deploy/slurm's scripts) and a real redis-server: batch jobs run as the user
                      nobody, two trainsim ranks under LD_PRELOAD=libft.so per job. Checked: the
                      prolog's worker runs as the job's user with no secret in its arguments, its
                      /metrics answers during the job, it adopts the ranks, which restore from
                      its plan (they would fail without it); the epilog stops it and leaves
                      nothing of a finished job (ftmaster running) in /dev/shm; of a job that did
                      not finish, only its arenas (ft_arenas=gc: a dead rank's segment, the plan
                      files, a stack file gone), nothing with ft_arenas=purge; it touches no
                      other job's file; a job that does not ask for ft gets no worker; an env
                      file that others may read is refused.

Every tool comes from scripts/install-deps.sh (python3-yaml, systemd, slurmctld, slurmd,
slurm-client, munge, redis-server); a missing one fails the test, saying so.
"""

import argparse
import base64
import json
import os
import pwd
import re
import secrets
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DEPLOY = os.path.join(REPO, "deploy")
sys.path.insert(0, os.path.dirname(HERE))
from redis_fixture import RedisServer, RespClient, RedisError, free_port  # noqa: E402


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def log(msg):
    print(msg, flush=True)


def need_tool(name, package):
    path = shutil.which(name, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
    check(path is not None, "%s is not installed (Debian package %s: scripts/install-deps.sh)"
          % (name, package))
    return path


def wait_for(pred, timeout, what, interval=0.1, fatal=True):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            if not fatal:
                return v
            fail("timed out after %.0f s waiting for %s" % (timeout, what))
        time.sleep(interval)


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def load_yaml_module():
    try:
        import yaml  # noqa: F401
    except ImportError:
        fail("PyYAML is not importable by %s (Debian package python3-yaml: scripts/install-deps.sh)"
             % sys.executable)
    import yaml
    return yaml


# ---- what the product accepts ------------------------------------------------------------------

def settings():
    """FT_* keys of common/config_table.def."""
    text = read(os.path.join(REPO, "common", "config_table.def"))
    keys = set(re.findall(r'FT_SETTING\(\s*\w+\s*,\s*\w+\s*,\s*"(FT_[A-Z0-9_]+)"', text))
    check(len(keys) > 50, "read only %d settings from common/config_table.def" % len(keys))
    return keys


class Cli:
    """The flags and subcommands a binary's --help lists; a flag takes a value when the help
    shows one after it (`--job J`, `[--redis URL]`)."""

    def __init__(self, binary):
        self.binary = binary
        self.name = os.path.basename(binary)
        p = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=20)
        text = p.stdout + p.stderr
        check(p.returncode == 0 and "usage:" in text, "%s --help failed: %s" % (binary, text[-400:]))
        self.flags = {}
        for m in re.finditer(r"(--[a-z][a-z0-9-]*)(?=([^a-z0-9-]|$))", text):
            flag = m.group(1)
            after = text[m.end():]
            takes = re.match(r" [^\s\]\[|(),:-]", after) is not None
            self.flags[flag] = self.flags.get(flag, False) or takes
        self.subcommands = set()
        for line in text.splitlines():
            m = re.match(r"^(?:usage:)?\s+%s\s+([a-z|]+)(\s|$)" % re.escape(self.name), line)
            if m:
                self.subcommands.update(m.group(1).split("|"))
            m = re.match(r"^  ([a-z]+)\s{2,}\S", line)
            if m:
                self.subcommands.add(m.group(1))
        check("--job" in self.flags and self.flags["--job"], "%s: --job not read from --help" % self.name)

    def check_argv(self, argv, where):
        """argv without the program; returns {flag: value}."""
        out = {}
        i = 0
        if argv and not argv[0].startswith("-"):
            check(argv[0] in self.subcommands, "%s: `%s %s`: no such subcommand (its --help lists %s)"
                  % (where, self.name, argv[0], sorted(self.subcommands)))
            out[""] = argv[0]
            i = 1
        while i < len(argv):
            tok = argv[i]
            check(tok.startswith("--"), "%s: `%s`: stray argument %r" % (where, self.name, tok))
            flag, eq, value = tok.partition("=")
            check(flag in self.flags, "%s: `%s %s`: not a flag of %s (--help lists %s)"
                  % (where, self.name, flag, self.name, sorted(self.flags)))
            if self.flags[flag] and not eq:
                check(i + 1 < len(argv) and not argv[i + 1].startswith("--"),
                      "%s: `%s %s` needs a value" % (where, self.name, flag))
                value = argv[i + 1]
                i += 1
            check(not (eq and not self.flags[flag]), "%s: %s takes no value" % (where, flag))
            out[flag] = value
            i += 1
        return out


def ft_invocations(argv):
    """The ftworker/ftmaster command lines in a container's or unit's command: argv itself, or
    the simple commands of an `sh -c SCRIPT`."""
    if not argv:
        return []
    base = os.path.basename(argv[0])
    if base in ("ftworker", "ftmaster"):
        return [argv]
    if base in ("sh", "bash", "dash") and "-c" in argv:
        script = argv[argv.index("-c") + 1] if argv.index("-c") + 1 < len(argv) else ""
        found = []
        for line in script.splitlines():
            lex = shlex.shlex(line, posix=True, punctuation_chars=True)
            lex.whitespace_split = True
            words = []
            for tok in list(lex) + [";"]:
                if tok in (";", "&&", "||", "|", "&", "(", ")"):
                    while words and ("=" in words[0] and not words[0].startswith("-")
                                     or words[0] == "exec"):
                        words.pop(0)
                    if words and os.path.basename(words[0]) in ("ftworker", "ftmaster"):
                        found.append(words)
                    words = []
                else:
                    words.append(tok)
        return found
    return []


# ---- Kubernetes ------------------------------------------------------------------------------

KINDS = {
    ("v1", "Namespace"): False, ("v1", "Secret"): True, ("v1", "ConfigMap"): True,
    ("v1", "Service"): True, ("apps/v1", "Deployment"): True, ("apps/v1", "DaemonSet"): True,
    ("apps/v1", "StatefulSet"): True, ("batch/v1", "Job"): True,
    ("policy/v1", "PodDisruptionBudget"): True, ("networking.k8s.io/v1", "NetworkPolicy"): True,
    ("kustomize.config.k8s.io/v1beta1", "Kustomization"): False,
}
WORKLOADS = ("Deployment", "DaemonSet", "StatefulSet", "Job")
EXAMPLE = "training-job.yaml"
DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
VAR_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def k8s_load():
    yaml = load_yaml_module()
    kdir = os.path.join(DEPLOY, "kubernetes")
    files = sorted(f for f in os.listdir(kdir) if f.endswith((".yaml", ".yml")))
    check(files, "no YAML files in deploy/kubernetes")
    objs = []
    for f in files:
        try:
            docs = [d for d in yaml.safe_load_all(read(os.path.join(kdir, f))) if d is not None]
        except yaml.YAMLError as e:
            fail("deploy/kubernetes/%s does not parse: %s" % (f, e))
        check(docs, "deploy/kubernetes/%s holds no document" % f)
        for d in docs:
            check(isinstance(d, dict), "%s: a document that is not a mapping" % f)
            objs.append((f, d))
    return files, objs


def pod_spec(obj):
    return obj["spec"]["template"]["spec"]


def containers(spec):
    return list(spec.get("initContainers", [])) + list(spec.get("containers", []))


def labels_match(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def secret_data(obj):
    data = dict(obj.get("stringData") or {})
    for k, v in (obj.get("data") or {}).items():
        data[k] = base64.b64decode(v).decode()
    return data


class K8s:
    def __init__(self):
        self.files, self.objs = k8s_load()
        self.by_kind = {}
        for f, o in self.objs:
            self.by_kind.setdefault(o.get("kind"), []).append((f, o))

    def find(self, kind, name, namespace=None):
        for f, o in self.by_kind.get(kind, []):
            md = o.get("metadata", {})
            if md.get("name") == name and (namespace is None or md.get("namespace") == namespace):
                return o
        return None

    def one(self, kind, name):
        o = self.find(kind, name)
        check(o is not None, "no %s %s in deploy/kubernetes" % (kind, name))
        return o

    def container(self, kind, name, cname):
        for c in containers(pod_spec(self.one(kind, name))):
            if c["name"] == cname:
                return c
        fail("%s %s has no container %s" % (kind, name, cname))

    def env_sources(self, ns, c, where):
        """{name: how it is set} of a container: ('value', v), ('secret', ...), ('field', path),
        ('configmap', cm) for envFrom keys."""
        out = {}
        for ef in c.get("envFrom", []):
            if "configMapRef" in ef:
                cm = self.find("ConfigMap", ef["configMapRef"]["name"], ns)
                check(cm is not None, "%s: envFrom ConfigMap %s is in no manifest (namespace %s)"
                      % (where, ef["configMapRef"]["name"], ns))
                for k in (cm.get("data") or {}):
                    out[k] = ("configmap", cm["metadata"]["name"])
            elif "secretRef" in ef:
                s = self.find("Secret", ef["secretRef"]["name"], ns)
                check(s is not None, "%s: envFrom Secret %s is in no manifest" % (where, ef["secretRef"]["name"]))
                for k in secret_data(s):
                    out[k] = ("secret", s["metadata"]["name"])
            else:
                fail("%s: envFrom of an unknown kind: %r" % (where, ef))
        for e in c.get("env", []):
            name = e["name"]
            if "value" in e:
                v = e["value"]
                check(isinstance(v, str), "%s: env %s: a value must be a string (quote %r)" % (where, name, v))
                for ref in VAR_REF.findall(v):
                    check(ref in out, "%s: env %s refers to $(%s), defined nowhere before it "
                          "(Kubernetes would pass it literally)" % (where, name, ref))
                out[name] = ("value", v)
            else:
                vf = e.get("valueFrom") or {}
                if "secretKeyRef" in vf:
                    r = vf["secretKeyRef"]
                    s = self.find("Secret", r["name"], ns)
                    check(s is not None, "%s: env %s: Secret %s is in no manifest (namespace %s)"
                          % (where, name, r["name"], ns))
                    check(r["key"] in secret_data(s), "%s: env %s: Secret %s has no key %s"
                          % (where, name, r["name"], r["key"]))
                    out[name] = ("secret", r["name"], r["key"])
                elif "configMapKeyRef" in vf:
                    r = vf["configMapKeyRef"]
                    cm = self.find("ConfigMap", r["name"], ns)
                    check(cm is not None and r["key"] in (cm.get("data") or {}),
                          "%s: env %s: ConfigMap %s key %s is in no manifest" % (where, name, r["name"], r["key"]))
                    out[name] = ("configmapkey", r["name"], r["key"])
                elif "fieldRef" in vf:
                    path = vf["fieldRef"]["fieldPath"]
                    check(path in ("metadata.name", "metadata.namespace", "spec.nodeName", "status.podIP",
                                   "status.hostIP", "spec.serviceAccountName"),
                          "%s: env %s: fieldRef %s is not one the downward API gives" % (where, name, path))
                    out[name] = ("field", path)
                else:
                    fail("%s: env %s has neither value nor a known valueFrom" % (where, name))
        return out

    def env_value(self, ns, src, overrides=None):
        """The literal a source gives (no expansion)."""
        kind = src[0]
        if kind == "value":
            return src[1]
        if kind == "secret" and len(src) == 3:
            return secret_data(self.find("Secret", src[1], ns))[src[2]]
        if kind == "configmapkey":
            return self.find("ConfigMap", src[1], ns)["data"][src[2]]
        return None


def expand(text, env):
    return VAR_REF.sub(lambda m: env.get(m.group(1), m.group(0)), text)


def case_kubernetes(args):
    known = settings()
    clis = {"ftworker": Cli(args.ftworker), "ftmaster": Cli(args.ftmaster)}
    log("ftworker flags %s" % json.dumps(clis["ftworker"].flags, sort_keys=True))
    log("ftmaster flags %s, subcommands %s" % (json.dumps(clis["ftmaster"].flags, sort_keys=True),
                                               sorted(clis["ftmaster"].subcommands)))
    k = K8s()
    names = set()
    for f, o in k.objs:
        api, kind = o.get("apiVersion"), o.get("kind")
        check((api, kind) in KINDS, "%s: unknown apiVersion/kind %s/%s" % (f, api, kind))
        if kind == "Kustomization":
            continue
        md = o.get("metadata") or {}
        name = md.get("name", "")
        check(DNS1123.match(name) is not None, "%s: %s name %r is not a DNS-1123 label" % (f, kind, name))
        ns = md.get("namespace")
        if KINDS[(api, kind)]:
            if f == EXAMPLE:
                check(ns is None, "%s: the example is applied in the job's namespace: no namespace" % f)
            else:
                check(ns == "ft", "%s: %s %s must be in namespace ft, not %r" % (f, kind, name, ns))
        check((kind, ns, name) not in names, "%s: %s %s defined twice" % (f, kind, name))
        names.add((kind, ns, name))
    check(k.find("Namespace", "ft") is not None, "no Namespace ft")

    # kustomization: every file but the example, and nothing else.
    kust = [o for f, o in k.objs if o.get("kind") == "Kustomization"]
    check(len(kust) == 1, "one kustomization.yaml expected")
    listed = kust[0].get("resources", [])
    for r in listed:
        check(os.path.exists(os.path.join(DEPLOY, "kubernetes", r)), "kustomization lists missing %s" % r)
    expected = sorted(f for f in k.files if f not in (EXAMPLE, "kustomization.yaml"))
    check(sorted(listed) == expected, "kustomization.yaml lists %s, the files are %s" % (sorted(listed), expected))

    pods = []  # (file, workload, ns, labels, spec)
    for f, o in k.objs:
        if o.get("kind") not in WORKLOADS:
            continue
        where = "%s %s/%s" % (f, o["kind"], o["metadata"]["name"])
        ns = o["metadata"].get("namespace")
        tmpl = o["spec"]["template"]
        labels = (tmpl.get("metadata") or {}).get("labels") or {}
        sel = (o["spec"].get("selector") or {}).get("matchLabels")
        if o["kind"] != "Job":
            check(labels_match(sel, labels), "%s: selector %s does not match the template's labels %s"
                  % (where, sel, labels))
        spec = tmpl["spec"]
        pods.append((f, o, ns, labels, spec))
        if o["kind"] == "StatefulSet":
            svc = k.find("Service", o["spec"]["serviceName"], ns)
            check(svc is not None and svc["spec"].get("clusterIP") == "None",
                  "%s: serviceName %s is no headless Service" % (where, o["spec"]["serviceName"]))
        check(not spec.get("hostNetwork") and not spec.get("hostIPC"),
              "%s: hostNetwork/hostIPC: neither is needed" % where)
        if f != EXAMPLE:
            check(spec.get("automountServiceAccountToken") is False,
                  "%s: automountServiceAccountToken: false (ft never calls the Kubernetes API)" % where)
        psc = spec.get("securityContext") or {}
        check(psc.get("runAsNonRoot") is True and psc.get("runAsUser", 0) != 0,
              "%s: the pod must run as a non-root user" % where)
        check((psc.get("seccompProfile") or {}).get("type") == "RuntimeDefault",
              "%s: seccompProfile RuntimeDefault" % where)
        uses_host = spec.get("hostPID") or any("hostPath" in v for v in spec.get("volumes", []))
        check(not uses_host or o["metadata"]["name"] in ("ftworker", "train-llama"),
              "%s: only the worker and the training pods need host namespaces or paths" % where)
        port_names = set()
        mounts_ok = {v["name"] for v in spec.get("volumes", [])} | \
            {t["metadata"]["name"] for t in o["spec"].get("volumeClaimTemplates", [])}
        for c in containers(spec):
            cw = "%s container %s" % (where, c["name"])
            sc = c.get("securityContext") or {}
            check(sc.get("allowPrivilegeEscalation") is False, "%s: allowPrivilegeEscalation: false" % cw)
            check(not sc.get("privileged"), "%s: privileged" % cw)
            check((sc.get("capabilities") or {}).get("drop") == ["ALL"] and
                  not (sc.get("capabilities") or {}).get("add"), "%s: capabilities drop ALL, add none" % cw)
            for p in c.get("ports", []):
                port_names.add(p.get("name"))
            for vm in c.get("volumeMounts", []):
                check(vm["name"] in mounts_ok, "%s: mounts volume %s, which the pod lacks" % (cw, vm["name"]))
            if c in spec.get("containers", []):
                res = c.get("resources") or {}
                has_gpu = "nvidia.com/gpu" in (res.get("limits") or {})
                check(has_gpu or ({"cpu", "memory"} <= set((res.get("requests") or {})) and
                                  "memory" in (res.get("limits") or {})),
                      "%s: resources: requests cpu and memory, a memory limit" % cw)
            for probe in ("readinessProbe", "livenessProbe"):
                pr = c.get(probe) or {}
                for kind in ("httpGet", "tcpSocket"):
                    port = (pr.get(kind) or {}).get("port")
                    if isinstance(port, str):
                        check(port in {p.get("name") for p in c.get("ports", [])},
                              "%s: %s names port %s, which the container lacks" % (cw, probe, port))
            env = k.env_sources(ns, c, cw)
            for name in env:
                if name.startswith("FT_"):
                    check(name in known, "%s: %s is no ft setting (common/config_table.def)" % (cw, name))
            secret_vars = {n for n, s in env.items() if s[0] == "secret"}
            argv = list(c.get("command", [])) + list(c.get("args", []))
            for a in argv:
                for ref in VAR_REF.findall(a):
                    check(ref in env, "%s: $(%s) in its command is defined nowhere in its env" % (cw, ref))
                    check(ref not in secret_vars, "%s: $(%s) comes from a Secret: Kubernetes would put "
                          "it in the process's arguments" % (cw, ref))
                for s in k.by_kind.get("Secret", []):
                    for val in secret_data(s[1]).values():
                        check(len(val) < 8 or val not in a, "%s: a Secret's value in its command" % cw)
            literal = {n: k.env_value(ns, s) for n, s in env.items() if s[0] == "value"}
            for inv in ft_invocations([expand(a, {}) for a in argv]):
                prog = os.path.basename(inv[0])
                flags = clis[prog].check_argv(inv[1:], cw)
                check("--redis" not in flags, "%s: --redis on the command line: FT_REDIS from the Secret" % cw)
                log("%s: %s %s" % (cw, prog, " ".join(inv[1:])))
            ml = literal.get("FT_METRICS_LISTEN")
            if ml is not None:
                check(env.get("POD_IP") == ("field", "status.podIP") and ml.split(":")[0] == "$(POD_IP)",
                      "%s: FT_METRICS_LISTEN=%r: the pod's address ($(POD_IP) from status.podIP)" % (cw, ml))
            for name in ("FT_REDIS", "FT_REDIS_PASSWORD", "REDIS_PASSWORD"):
                if name in env:
                    check(env[name][0] == "secret", "%s: %s must come from a Secret" % (cw, name))
        pods[-1] = (f, o, ns, labels, spec, port_names)

    def pods_selected(ns, selector):
        return [p for p in pods if p[2] == ns and labels_match(selector, p[3])]

    for f, svc in k.by_kind.get("Service", []):
        ns = svc["metadata"].get("namespace")
        sel = svc["spec"].get("selector")
        matched = pods_selected(ns, sel) if "job-name" not in (sel or {}) else \
            [p for p in pods if p[1]["kind"] == "Job" and p[1]["metadata"]["name"] == sel["job-name"]]
        check(matched, "%s: Service %s selects no pod (%s)" % (f, svc["metadata"]["name"], sel))
        for port in svc["spec"].get("ports", []):
            tp = port.get("targetPort")
            if isinstance(tp, str):
                check(all(tp in p[5] for p in matched), "%s: Service %s targets port %s, which its pods lack"
                      % (f, svc["metadata"]["name"], tp))
    for kind in ("NetworkPolicy", "PodDisruptionBudget"):
        for f, o in k.by_kind.get(kind, []):
            ns = o["metadata"]["namespace"]
            sel = o["spec"]["podSelector" if kind == "NetworkPolicy" else "selector"]["matchLabels"]
            check(pods_selected(ns, sel), "%s: %s %s selects no pod" % (f, kind, o["metadata"]["name"]))
            for rule in o["spec"].get("ingress", []):
                for peer in rule.get("from", []):
                    if "podSelector" in peer and "namespaceSelector" not in peer:
                        check(pods_selected(ns, peer["podSelector"]["matchLabels"]),
                              "%s: %s %s admits pods that do not exist" % (f, kind, o["metadata"]["name"]))

    # What the deployment needs, object by object.
    ds = k.one("DaemonSet", "ftworker")
    wspec = pod_spec(ds)
    check(wspec.get("hostPID") is True, "ftworker: hostPID: true (it verifies and signals the ranks by pid)")
    wc = k.container("DaemonSet", "ftworker", "ftworker")

    def shm_mounted(spec, c, where):
        vols = {v["name"]: v for v in spec.get("volumes", [])}
        for vm in c.get("volumeMounts", []):
            v = vols.get(vm["name"], {})
            if vm["mountPath"] == "/dev/shm":
                check((v.get("hostPath") or {}).get("path") == "/dev/shm" and not vm.get("readOnly"),
                      "%s: /dev/shm must be the node's (hostPath /dev/shm), writable" % where)
                return
        fail("%s: the node's /dev/shm is not mounted at /dev/shm" % where)

    shm_mounted(wspec, wc, "ftworker")
    check(wc["securityContext"].get("readOnlyRootFilesystem") is True, "ftworker: readOnlyRootFilesystem")
    wenv = k.env_sources("ft", wc, "ftworker")
    wflags = clis["ftworker"].check_argv(ft_invocations(wc["command"] + wc.get("args", []))[0][1:], "ftworker")
    check(wflags.get("--node") == "$(NODE_NAME)" and wenv.get("NODE_NAME") == ("field", "spec.nodeName"),
          "ftworker: --node from spec.nodeName")
    check(wenv.get("FT_LISTEN") == ("value", "$(POD_IP)"), "ftworker: FT_LISTEN=$(POD_IP): peers pull from the pod")
    tport = k.env_value("ft", wenv.get("FT_TRANSFER_PORT", ("value", "")))
    check(tport and int(tport) in {p["containerPort"] for p in wc["ports"]},
          "ftworker: FT_TRANSFER_PORT %r is no container port" % tport)
    cm = k.one("ConfigMap", "ft-job")
    check(DNS1123.match(cm["data"].get("FT_JOB", "")) or re.match(r"^[A-Za-z0-9_-]{1,48}$", cm["data"].get("FT_JOB", "")),
          "ConfigMap ft-job: FT_JOB missing or not a plain job name")
    for key in cm["data"]:
        check(key in known, "ConfigMap ft-job: %s is no ft setting" % key)

    dep = k.one("Deployment", "ftmaster")
    check(dep["spec"]["replicas"] >= 2, "ftmaster: two replicas (the leader lease lets one stand by)")
    mc = k.container("Deployment", "ftmaster", "ftmaster")
    menv = k.env_sources("ft", mc, "ftmaster")
    mflags = clis["ftmaster"].check_argv(ft_invocations(mc["command"] + mc.get("args", []))[0][1:], "ftmaster")
    check(mflags.get("") == "run", "ftmaster: the container runs `ftmaster run`")
    check(mflags.get("--id") == "$(POD_NAME)" and menv.get("POD_NAME") == ("field", "metadata.name"),
          "ftmaster: --id from the pod's name: each replica its own lease id")

    job = k.one("Job", "train-llama")
    tspec = pod_spec(job)
    check(tspec.get("hostPID") is True, "training pods: hostPID: true (the DaemonSet worker sees and stops the ranks)")
    check(tspec["securityContext"]["runAsUser"] == wspec["securityContext"]["runAsUser"],
          "training pods run as uid %s, the worker as %s: segments and arenas are 0600, their owner's"
          % (tspec["securityContext"]["runAsUser"], wspec["securityContext"]["runAsUser"]))
    tc = k.container("Job", "train-llama", "train")
    shm_mounted(tspec, tc, "training pod")
    tenv = k.env_sources(None, tc, "training pod")
    for name in tenv:
        if name.startswith("FT_"):
            check(name in known, "training pod: %s is no ft setting" % name)
    check(tenv.get("FT_JOB") == ("value", cm["data"]["FT_JOB"]),
          "training pod: FT_JOB %r, the workers watch %r" % (tenv.get("FT_JOB"), cm["data"]["FT_JOB"]))
    check(tenv.get("FT_NODE_ID") == ("field", "spec.nodeName"), "training pod: FT_NODE_ID from spec.nodeName, "
          "the worker's --node")
    preload = tenv.get("LD_PRELOAD", ("", ""))[1]
    mounts = {vm["mountPath"]: vm["name"] for vm in tc.get("volumeMounts", [])}
    check(os.path.dirname(preload) in mounts, "training pod: LD_PRELOAD %s is on no mounted volume" % preload)
    copied = False
    for ic in tspec.get("initContainers", []):
        imounts = {vm["mountPath"]: vm["name"] for vm in ic.get("volumeMounts", [])}
        cmd = ic.get("command", []) + ic.get("args", [])
        if cmd and cmd[-1].startswith(tuple(imounts)) and "libft.so" in " ".join(cmd):
            dest = cmd[-1]
            vol = imounts[[m for m in imounts if dest.startswith(m)][0]]
            copied = vol == mounts[os.path.dirname(preload)] and \
                os.path.basename(dest) == os.path.basename(preload)
    check(copied, "training pod: no init container puts libft.so where LD_PRELOAD (%s) looks" % preload)
    grace = k.env_value(None, tenv["FT_CKPT_TERM_GRACE"]) if "FT_CKPT_TERM_GRACE" in tenv else "10s"
    grace_s = float(re.match(r"^([0-9.]+)s$", grace).group(1))
    check(grace_s + 5 < tspec.get("terminationGracePeriodSeconds", 30),
          "training pod: FT_CKPT_TERM_GRACE %s must stay under terminationGracePeriodSeconds %s"
          % (grace, tspec.get("terminationGracePeriodSeconds", 30)))

    rc = k.container("StatefulSet", "ft-redis", "redis")
    script = (rc.get("command", []) + rc.get("args", []))[-1]
    check("requirepass" in script and "$REDIS_PASSWORD" in script and "redis-server \"$REDIS_CONF\"" in script,
          "redis: the password goes into the config file, not redis-server's arguments")
    # (Run, redis-server rewrites its process title at once: only the script shows it.)
    for line in script.splitlines():
        check("redis-server" not in line or "PASSWORD" not in line,
              "redis: the password on redis-server's command line: %s" % line.strip())
    log("kubernetes: %d documents in %d files checked" % (len(k.objs), len(k.files)))


# ---- Kubernetes containers, run here ----------------------------------------------------------

def listening(port):
    """Addresses with a TCP listener on `port` (IPv4, /proc/net/tcp)."""
    out = set()
    for line in read("/proc/net/tcp").splitlines()[1:]:
        parts = line.split()
        local, st = parts[1], parts[3]
        addr, p = local.split(":")
        if st == "0A" and int(p, 16) == port:
            out.add(socket.inet_ntoa(bytes.fromhex(addr)[::-1]))
    return out


def cmdline(pid):
    return read("/proc/%d/cmdline" % pid).replace("\0", " ")


def metrics_address(logfile):
    m = re.search(r"metrics: serving http://([0-9.]+):(\d+)/metrics", read(logfile))
    return (m.group(1), int(m.group(2))) if m else None


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


class Procs:
    def __init__(self):
        self.procs = []

    def start(self, argv, env, logfile):
        f = open(logfile, "w")
        p = subprocess.Popen(argv, env=env, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.procs.append(p)
        return p

    def stop_all(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def base_env():
    env = {k: v for k, v in os.environ.items() if not k.startswith("FT_")}
    return env


def remove_job_files(job, dirs=("/dev/shm",)):
    for d in dirs:
        for f in os.listdir(d):
            if (f.startswith("ft.%s." % job) or re.match(r"^ft-[a-z]+\.%s\." % re.escape(job), f)):
                try:
                    os.unlink(os.path.join(d, f))
                except OSError:
                    pass


def case_kubernetes_run(args):
    need_tool("redis-server", "redis-server")
    k = K8s()
    tmp = tempfile.mkdtemp(prefix="ft-deploy-k8s-")
    job = "deploy-k8s-%d" % os.getpid()
    password = secrets.token_hex(16)
    redis_port = free_port()
    pod_ip = {"redis": "127.0.0.2", "ftmaster-a": "127.0.0.3", "ftmaster-b": "127.0.0.4", "ftworker": "127.0.0.5"}
    node = "gpu-node-1"
    # The Secret's and ConfigMap's values as this test's: its Redis, a job of its own.
    secret = k.one("Secret", "ft-redis")
    secret["stringData"] = {"redis-url": "redis://%s:%d" % (pod_ip["redis"], redis_port),
                            "redis-password": password}
    secret.pop("data", None)
    k.one("ConfigMap", "ft-job")["data"]["FT_JOB"] = job
    binaries = {"/opt/ft/bin/ftworker": args.ftworker, "/opt/ft/bin/ftmaster": args.ftmaster}

    def container_env(kind, name, cname, fields, overrides=None):
        o = k.one(kind, name)
        c = k.container(kind, name, cname)
        ns = o["metadata"].get("namespace")
        env = base_env()
        for n, src in k.env_sources(ns, c, "%s %s" % (kind, name)).items():
            if src[0] == "field":
                env[n] = fields[src[1]]
            elif src[0] in ("configmap", "secret") and len(src) == 2:
                data = k.find("ConfigMap", src[1], ns)["data"] if src[0] == "configmap" else \
                    secret_data(k.find("Secret", src[1], ns))
                env[n] = data[n]
            else:
                env[n] = expand(k.env_value(ns, src), env)
        env.update(overrides or {})
        argv = [binaries.get(a, a) for a in (expand(a, env) for a in c.get("command", []) + c.get("args", []))]
        return argv, env

    procs = Procs()
    db = None
    try:
        # Redis: the StatefulSet's start script, its volumes as directories here.
        rdir = os.path.join(tmp, "redis")
        os.makedirs(os.path.join(rdir, "data"))
        os.makedirs(os.path.join(rdir, "run"))
        over = {"REDIS_PORT": str(redis_port), "REDIS_CONF": os.path.join(rdir, "run", "redis.conf"),
                "REDIS_DATA_DIR": os.path.join(rdir, "data")}
        argv, env = container_env("StatefulSet", "ft-redis", "redis", {"status.podIP": pod_ip["redis"]}, over)
        for bad in ("change-me", "has space " + password, password[:31]):
            p = subprocess.run(argv, env=dict(env, REDIS_PASSWORD=bad), capture_output=True, text=True, timeout=10)
            check(p.returncode != 0 and "redis-password" in p.stderr,
                  "redis started with the password %r (rc %d: %s)" % (bad, p.returncode, p.stderr))
        rproc = procs.start(argv, env, os.path.join(tmp, "redis.log"))

        def redis_up():
            try:
                with RespClient(pod_ip["redis"], redis_port, password, timeout=1) as c:
                    return c.command("PING") == "PONG"
            except (OSError, RedisError):
                check(rproc.poll() is None, "redis exited: %s" % read(os.path.join(tmp, "redis.log"))[-800:])
                return False
        wait_for(redis_up, 10, "the Redis pod's script to serve")
        try:
            with RespClient(pod_ip["redis"], redis_port, None, timeout=2) as c:
                c.command("GET", "x")
            fail("redis answered without the password")
        except RedisError as e:
            check("NOAUTH" in str(e), "redis without a password: %s" % e)
        check(password not in cmdline(rproc.pid), "the Redis password is in redis-server's arguments: %s"
              % cmdline(rproc.pid))
        check(stat.S_IMODE(os.stat(over["REDIS_CONF"]).st_mode) == 0o600, "redis.conf is not 0600")
        addrs = listening(redis_port)
        check(addrs == {pod_ip["redis"], "127.0.0.1"}, "redis listens on %s: the pod's address and "
              "loopback only" % sorted(addrs))
        db = RespClient(pod_ip["redis"], redis_port, password)
        log("redis: up on %s, password from the Secret only in its 0600 config" % sorted(addrs))

        # Two ftmaster replicas.
        masters = {}
        for pod in ("ftmaster-a", "ftmaster-b"):
            argv, env = container_env("Deployment", "ftmaster", "ftmaster",
                                      {"metadata.name": pod, "status.podIP": pod_ip[pod]})
            logf = os.path.join(tmp, pod + ".log")
            masters[pod] = (procs.start(argv, env, logf), logf)
            log("%s: %s" % (pod, " ".join(argv)))
        leader = wait_for(lambda: db.command("GET", "ft:{%s}:leader" % job), 15, "a master to lead")
        check(leader in masters, "the lease names %r, not a pod" % leader)
        for pod, (p, logf) in masters.items():
            check(p.poll() is None, "%s exited: %s" % (pod, read(logf)[-800:]))
            check(password not in cmdline(p.pid), "%s: the password is in its arguments" % pod)
            addr = wait_for(lambda: metrics_address(logf), 10, pod + "'s metrics line")
            check(addr[0] == pod_ip[pod], "%s serves /metrics on %s, not its pod address" % (pod, addr[0]))
            want = "1" if pod == leader else "0"
            wait_for(lambda: re.search(r"^ft_master_leader\{[^}]*\} %s$" % want,
                                       http_get("http://%s:%d/metrics" % addr), re.M),
                     10, "%s's /metrics to say ft_master_leader %s" % (pod, want))
        standby = [p for p in masters if p != leader][0]
        masters[leader][0].kill()
        t0 = time.monotonic()
        wait_for(lambda: db.command("GET", "ft:{%s}:leader" % job) == standby, 15, standby + " to take over")
        log("ftmaster: %s led, %s took over %.1f s after it was killed" % (leader, standby, time.monotonic() - t0))

        # The worker DaemonSet's container.
        argv, wenv = container_env("DaemonSet", "ftworker", "ftworker",
                                   {"spec.nodeName": node, "status.podIP": pod_ip["ftworker"]})
        wlog = os.path.join(tmp, "ftworker.log")
        worker = procs.start(argv, wenv, wlog)
        log("ftworker: %s" % " ".join(argv))
        check(password not in cmdline(worker.pid), "ftworker: the password is in its arguments")

        def endpoint():
            v = db.command("HGET", "ft:{%s}:endpoints" % job, node)
            check(worker.poll() is None, "ftworker exited: %s" % read(wlog)[-1000:])
            return json.loads(v) if v else None
        ep = wait_for(endpoint, 15, "the worker's transfer endpoint in Redis")
        check(ep.get("address") == pod_ip["ftworker"] and int(ep.get("port", 0)) == int(wenv["FT_TRANSFER_PORT"]),
              "the worker publishes %r, not %s:%s" % (ep, pod_ip["ftworker"], wenv["FT_TRANSFER_PORT"]))
        check(listening(ep["port"]) == {pod_ip["ftworker"]}, "the transfer port listens on %s"
              % sorted(listening(ep["port"])))
        addr = wait_for(lambda: metrics_address(wlog), 10, "the worker's metrics line")
        check(addr[0] == pod_ip["ftworker"], "ftworker serves /metrics on %s, not its pod address" % addr[0])
        check(listening(addr[1]) == {pod_ip["ftworker"]}, "ftworker's metrics port listens on %s"
              % sorted(listening(addr[1])))

        # A rank with the training Job's environment (trainsim standing in for torchrun) on the
        # same node: its libft.so where the init container copies it.
        libdir = os.path.join(tmp, "ft-lib")
        os.makedirs(libdir)
        shutil.copy(args.libft, os.path.join(libdir, "libft.so"))
        _, tenv = container_env("Job", "train-llama", "train", {"spec.nodeName": node}, {"FT_JOB": job})
        check(tenv["LD_PRELOAD"] == "/ft/libft.so", "the example's LD_PRELOAD moved: %s" % tenv["LD_PRELOAD"])
        tenv.update({"LD_PRELOAD": os.path.join(libdir, "libft.so"), "RANK": "0", "WORLD_SIZE": "1",
                     "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())})
        # 1 s of training: a worker lists new segments about every tick, a rank of 0.1 s may
        # come and go unseen.
        p = subprocess.run([args.trainsim, "--steps", "20", "--compute-ms", "50", "--param-bytes", "256kb",
                            "--ft", "restore"],
                           env=tenv, capture_output=True, text=True, timeout=60)
        check(p.returncode == 0 and "checksum=" in p.stdout,
              "the rank failed (rc %d): %s\n%s" % (p.returncode, p.stdout[-600:], p.stderr[-1500:]))
        m = json.loads(db.command("HGET", "ft:{%s}:ranks" % job, "0") or "{}")
        check(m.get("node") == node, "the worker did not adopt the rank on node %s: %r" % (node, m))
        check(m.get("restored_step") == -1 and m.get("restore_plan", 0) >= 0,
              "the rank did not restore from the worker's plan: %r" % m)
        log("rank 0 (the training pod's env) adopted by the worker on %s, restored from its plan" % node)
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=15)
        check(worker.returncode == 0, "ftworker exited %d at SIGTERM" % worker.returncode)
        check(not os.path.exists("/dev/shm/ft-plan.%s.%s" % (job, node)), "the stopped worker left its plan file")
        for pod, (mp, logf) in masters.items():
            check(password not in read(logf), "%s logged the Redis password" % pod)
        check(password not in read(wlog), "ftworker logged the Redis password")
        log("PASS kubernetes-run")
    finally:
        procs.stop_all()
        if db is not None:
            db.close()
        remove_job_files(job)
        if os.environ.get("FT_TEST_KEEP") is None:
            shutil.rmtree(tmp, ignore_errors=True)


# ---- systemd ----------------------------------------------------------------------------------

def parse_unit(path):
    sections, cur = {}, None
    for raw in read(path).splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            cur = sections.setdefault(line[1:-1], {})
            continue
        check(cur is not None and "=" in line, "%s: a line outside a section: %r" % (path, raw))
        key, _, val = line.partition("=")
        cur.setdefault(key.strip(), []).append(val.strip())
    return sections


def case_systemd(args):
    sa = need_tool("systemd-analyze", "systemd")
    known = settings()
    clis = {"ftworker": Cli(args.ftworker), "ftmaster": Cli(args.ftmaster)}
    sdir = os.path.join(DEPLOY, "systemd")
    units = sorted(f for f in os.listdir(sdir) if f.endswith(".service"))
    check(sorted(units) == ["ftmaster@.service", "ftworker@.service"], "units: %s" % units)
    tmp = tempfile.mkdtemp(prefix="ft-deploy-systemd-")
    thresholds = {"ftworker@.service": 25, "ftmaster@.service": 20}  # exposure x10
    try:
        for unit in units:
            path = os.path.join(sdir, unit)
            sec = parse_unit(path)
            svc = sec.get("Service", {})
            check("Install" in sec and "Unit" in sec, "%s: [Unit], [Service], [Install]" % unit)
            execs = svc.get("ExecStart", [])
            check(len(execs) == 1, "%s: one ExecStart" % unit)
            argv = shlex.split(execs[0].replace("%i", "job-a").replace("%H", "host-a"))
            prog = os.path.basename(argv[0])
            check(argv[0] == "/opt/ft/bin/" + prog and prog in clis, "%s: ExecStart runs %s" % (unit, argv[0]))
            flags = clis[prog].check_argv(argv[1:], unit)
            check(flags.get("--job") == "job-a", "%s: the instance is the job (--job %%i)" % unit)
            check("--redis" not in flags, "%s: the Redis address comes from the EnvironmentFile" % unit)
            envfiles = svc.get("EnvironmentFile", [])
            check(len(envfiles) == 1 and not envfiles[0].startswith("-"),
                  "%s: one EnvironmentFile, required (the Redis password is in it)" % unit)
            example = os.path.join(sdir, os.path.basename(envfiles[0]) + ".example")
            check(os.path.exists(example), "%s: no %s beside it" % (unit, os.path.basename(example)))
            for line in read(example).splitlines():
                line = line.lstrip("#").strip()
                m = re.match(r"^([A-Z][A-Z0-9_]*)=", line)
                if m:
                    check(m.group(1) in known, "%s: %s is no ft setting" % (example, m.group(1)))
            for key, want in (("NoNewPrivileges", "yes"), ("ProtectSystem", "strict"),
                              ("CapabilityBoundingSet", "")):
                check(svc.get(key) == [want], "%s: %s=%s" % (unit, key, want))
            if prog == "ftworker":
                check(svc.get("User", ["root"])[0] not in ("root", "0"), "ftworker@: runs as the training user, not root")
                check("PrivateDevices" not in svc, "ftworker@: PrivateDevices would give it a /dev/shm of its own")
                check(svc.get("RemoveIPC") == ["no"], "ftworker@: RemoveIPC=no (yes removes the ranks' /dev/shm files)")
                check(svc.get("PrivateIPC", ["no"]) == ["no"], "ftworker@: no PrivateIPC")
            # systemd-analyze on an instance, ExecStart pointed at this build.
            inst = os.path.join(tmp, unit.replace("@.", "@job-a."))
            with open(inst, "w") as f:
                f.write(read(path).replace("/opt/ft/bin/ftworker", args.ftworker)
                        .replace("/opt/ft/bin/ftmaster", args.ftmaster))
            p = subprocess.run([sa, "verify", "--man=no", inst], capture_output=True, text=True, timeout=60)
            out = (p.stdout + p.stderr).strip()
            check(p.returncode == 0 and not out, "systemd-analyze verify %s (rc %d):\n%s" % (unit, p.returncode, out))
            p = subprocess.run([sa, "security", "--offline=yes", "--threshold=%d" % thresholds[unit], inst],
                               capture_output=True, text=True, timeout=60)
            lvl = re.search(r"Overall exposure level for \S+: ([0-9.]+)", p.stdout)
            check(p.returncode == 0 and lvl, "systemd-analyze security %s: exposure above %.1f (rc %d):\n%s"
                  % (unit, thresholds[unit] / 10, p.returncode, p.stdout[-1500:]))
            log("%s: verify clean, exposure %s (threshold %.1f), %s %s" % (unit, lvl.group(1), thresholds[unit] / 10,
                                                                          prog, " ".join(argv[1:])))
        # The arenas' huge-page tmpfs (docs/checkpoints.md, "Arenas on huge pages"): a mount unit
        # is named by its path, or systemd refuses it.
        mounts = sorted(f for f in os.listdir(sdir) if f.endswith(".mount"))
        check(mounts == ["run-ft.mount"], "mount units: %s" % mounts)
        sec = parse_unit(os.path.join(sdir, "run-ft.mount")).get("Mount", {})
        options = ",".join(sec.get("Options", [])).split(",")
        check(sec.get("Where") == ["/run/ft"] and sec.get("Type") == ["tmpfs"],
              "run-ft.mount: a tmpfs at /run/ft: %s" % sec)
        check("huge=within_size" in options and "mode=1777" in options,
              "run-ft.mount: huge=within_size and mode 1777 (each arena is its user's 0600): %s" % options)
        esc = subprocess.run([need_tool("systemd-escape", "systemd"), "-p", "--suffix=mount", "/run/ft"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
        check(esc == "run-ft.mount", "run-ft.mount: systemd names /run/ft's unit %r" % esc)
        shutil.copy(os.path.join(sdir, "run-ft.mount"), os.path.join(tmp, "run-ft.mount"))
        p = subprocess.run([sa, "verify", "--man=no", os.path.join(tmp, "run-ft.mount")],
                           capture_output=True, text=True, timeout=60)
        out = (p.stdout + p.stderr).strip()
        check(p.returncode == 0 and not out, "systemd-analyze verify run-ft.mount (rc %d):\n%s" % (p.returncode, out))
        log("run-ft.mount: verify clean, %s" % ",".join(options))
        log("PASS systemd")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ---- Slurm ------------------------------------------------------------------------------------

class Slurm:
    """munged, slurmctld and slurmd of a one-node cluster in `root`."""

    def __init__(self, root, prolog, epilog):
        self.root = root
        self.procs = Procs()
        self.node = socket.gethostname().split(".")[0]
        self.conf = os.path.join(root, "slurm.conf")
        self.env = dict(base_env(), SLURM_CONF=self.conf)
        sock_dir = os.path.join(root, "munge-sock")
        key_dir = os.path.join(root, "munge")
        for d, mode in ((sock_dir, 0o755), (key_dir, 0o700), (os.path.join(root, "ctld"), 0o700),
                        (os.path.join(root, "slurmd"), 0o755)):
            os.makedirs(d)
            os.chmod(d, mode)
        self.socket = os.path.join(sock_dir, "munge.socket")
        subprocess.run([need_tool("mungekey", "munge"), "-c", "-k", os.path.join(key_dir, "munge.key")],
                       check=True, capture_output=True, timeout=20)
        ctld_port, d_port = free_port(), free_port()
        with open(self.conf, "w") as f:
            f.write("\n".join([
                "ClusterName=ftdeploy",
                # Job ids name ft jobs ("ft" comment) and so files in /dev/shm: none shared
                # with another run of this test.
                "FirstJobId=%d" % (100000 + os.getpid() % 100000 * 100),
                "SlurmctldHost=%s(127.0.0.1)" % self.node,
                "SlurmctldPort=%d" % ctld_port,
                "SlurmdPort=%d" % d_port,
                "SlurmUser=root",
                "SlurmdUser=root",
                "AuthType=auth/munge",
                "CredType=cred/munge",
                "AuthInfo=socket=%s" % self.socket,
                "StateSaveLocation=%s/ctld" % root,
                "SlurmdSpoolDir=%s/slurmd" % root,
                "SlurmctldPidFile=%s/slurmctld.pid" % root,
                "SlurmdPidFile=%s/slurmd.pid" % root,
                "SlurmctldLogFile=%s/slurmctld.log" % root,
                "SlurmdLogFile=%s/slurmd.log" % root,
                "ProctrackType=proctrack/linuxproc",
                "TaskPlugin=task/none",
                "JobAcctGatherType=jobacct_gather/none",
                "AccountingStorageType=accounting_storage/none",
                "MpiDefault=none",
                "SchedulerType=sched/builtin",
                "SelectType=select/cons_tres",
                "SelectTypeParameters=CR_Core",
                "SlurmdParameters=config_overrides",
                "ReturnToService=2",
                "KillWait=5",
                "PrologFlags=Alloc",
                "Prolog=%s" % prolog,
                "Epilog=%s" % epilog,
                "NodeName=%s NodeAddr=127.0.0.1 CPUs=4 State=UNKNOWN" % self.node,
                "PartitionName=debug Nodes=%s Default=YES MaxTime=INFINITE State=UP" % self.node,
                ""]))

    def start(self):
        munged = need_tool("munged", "munge")
        key = os.path.join(self.root, "munge", "munge.key")
        self.procs.start([munged, "-F", "--socket=" + self.socket, "--key-file=" + key,
                          "--pid-file=" + os.path.join(self.root, "munge", "munged.pid"),
                          "--log-file=" + os.path.join(self.root, "munge", "munged.log"),
                          "--seed-file=" + os.path.join(self.root, "munge", "munged.seed")],
                         self.env, os.path.join(self.root, "munged.out"))
        wait_for(lambda: os.path.exists(self.socket), 10, "munged's socket")
        self.procs.start([need_tool("slurmctld", "slurmctld"), "-D", "-f", self.conf], self.env,
                         os.path.join(self.root, "slurmctld.out"))
        self.procs.start([need_tool("slurmd", "slurmd"), "-D", "-f", self.conf, "-N", self.node], self.env,
                         os.path.join(self.root, "slurmd.out"))

        def idle():
            for p in self.procs.procs:
                check(p.poll() is None, "a Slurm daemon exited: %s" % self.logs())
            p = subprocess.run(["sinfo", "-h", "-o", "%t"], env=self.env, capture_output=True, text=True, timeout=10)
            return p.stdout.strip() == "idle"
        wait_for(idle, 30, "the one-node Slurm to be idle", interval=0.3)

    def logs(self):
        return "\n".join("== %s\n%s" % (n, read(os.path.join(self.root, n))[-1500:])
                         for n in ("slurmctld.log", "slurmd.log", "slurmctld.out", "slurmd.out", "munged.out"))

    def submit(self, script, args):
        p = subprocess.run(["sbatch", "--parsable"] + args + [script], env=self.env, capture_output=True,
                           text=True, timeout=30)
        check(p.returncode == 0, "sbatch failed: %s%s" % (p.stdout, p.stderr))
        return p.stdout.strip().split(";")[0]

    def job_state(self, jobid):
        p = subprocess.run(["scontrol", "show", "job", "-o", jobid], env=self.env, capture_output=True,
                           text=True, timeout=10)
        m = re.search(r"JobState=(\S+)", p.stdout)
        ec = re.search(r"\bExitCode=(\S+)", p.stdout)
        return (m.group(1) if m else "?"), (ec.group(1) if ec else "?")

    def wait_done(self, jobid, timeout=60):
        def done():
            state, ec = self.job_state(jobid)
            if state in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "?"):
                return None
            p = subprocess.run(["sinfo", "-h", "-o", "%t"], env=self.env, capture_output=True, text=True, timeout=10)
            return (state, ec) if p.stdout.strip() == "idle" else None
        return wait_for(done, timeout, "job %s and its epilog to end" % jobid, interval=0.2)

    def stop(self):
        self.procs.stop_all()


def shm_files(job, dirs=("/dev/shm",)):
    out = []
    for d in dirs:
        for f in sorted(os.listdir(d)):
            if f.startswith("ft.%s." % job) or re.match(r"^ft-[a-z]+\.%s\." % re.escape(job), f):
                out.append(os.path.join(d, f))
    return out


def write_file(path, text, mode):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


def dead_pid():
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def case_slurm(args):
    for tool, pkg in (("slurmctld", "slurmctld"), ("slurmd", "slurmd"), ("sbatch", "slurm-client"),
                      ("munged", "munge"), ("setpriv", "util-linux"), ("redis-server", "redis-server")):
        need_tool(tool, pkg)
    check(os.geteuid() == 0, "the Slurm case runs slurmd and the prolog as root (it is run as uid %d)" % os.geteuid())
    user = pwd.getpwnam("nobody")
    # The jobs run as nobody: the build must be theirs to read.
    p = subprocess.run(["setpriv", "--reuid=%d" % user.pw_uid, "--regid=%d" % user.pw_gid, "--clear-groups",
                        "sh", "-c", 'test -x "$1" && test -x "$2" && test -r "$3" && test -x /usr/bin/python3',
                        "-", args.trainsim, args.ftworker, args.libft], capture_output=True, timeout=10)
    check(p.returncode == 0, "the jobs run as nobody, who cannot run %s, %s, /usr/bin/python3 or read %s: "
          "the build must be readable by other users" % (args.trainsim, args.ftworker, args.libft))
    tag = "%d" % os.getpid()
    root = tempfile.mkdtemp(prefix="ft-deploy-slurm-")
    os.chmod(root, 0o755)
    etc, run, logd, jobs, ckpt = (os.path.join(root, d) for d in ("etc", "run", "log", "jobs", "ckpt"))
    os.makedirs(etc, 0o755)
    for d in (jobs, ckpt):
        os.makedirs(d)
        os.chown(d, user.pw_uid, user.pw_gid)
    python = "/usr/bin/python3"
    redis = RedisServer()
    metrics_port = free_port()
    conf = os.path.join(etc, "slurm-hooks.conf")
    worker_env = os.path.join(etc, "worker.env")
    hooks = {"ft_worker": args.ftworker, "ft_worker_env": worker_env, "ft_run_dir": run, "ft_log_dir": logd,
             "ft_jobs": "comment", "ft_arenas": "gc", "ft_stop_timeout": "10"}

    def write_conf(**changes):
        h = dict(hooks, **changes)
        write_file(conf, "".join("%s=%s\n" % kv for kv in h.items()), 0o600)

    wrappers = {}
    for hook in ("prolog", "epilog"):
        wrappers[hook] = os.path.join(root, hook)
        write_file(wrappers[hook], "#!/bin/sh\nFTSLURM_CONF=%s\nexport FTSLURM_CONF\nexec %s\n"
                   % (conf, os.path.join(DEPLOY, "slurm", hook + ".sh")), 0o755)
    slurm = Slurm(root, wrappers["prolog"], wrappers["epilog"])
    master = None
    planted = []
    jobnames = []
    try:
        redis.start()
        write_conf()
        write_file(worker_env, "".join("%s=%s\n" % kv for kv in (
            ("FT_REDIS", redis.url), ("FT_REDIS_PASSWORD", redis.password), ("FT_CKPT_DIR", ckpt),
            ("FT_METRICS_LISTEN", "127.0.0.1:%d" % metrics_port))), 0o600)

        # The prolog alone: an env file others may read is refused (no worker, said in the log).
        os.chmod(worker_env, 0o644)
        fake_id = str(900000 + os.getpid() % 90000)
        env = {"SLURM_JOB_ID": fake_id, "SLURM_JOB_UID": str(user.pw_uid), "SLURM_JOB_GID": str(user.pw_gid),
               "SLURM_JOB_USER": "nobody", "SLURM_JOB_COMMENT": "ft", "SLURM_SCRIPT_CONTEXT": "prolog_slurmd"}
        p = subprocess.run([wrappers["prolog"]], env=env, capture_output=True, text=True, timeout=30)
        check(p.returncode == 0, "the prolog failed (rc %d): it must never fail a job" % p.returncode)
        check(not os.path.exists(os.path.join(run, "ftworker.%s.pid" % fake_id)),
              "the prolog started a worker with an env file others may read")
        os.chmod(worker_env, 0o600)
        log("prolog: a 0644 env file refused (rc 0, no worker)")

        slurm.start()
        log("slurm: one node (%s) idle" % slurm.node)

        job_a = "deploy-a-%s" % tag
        jobnames.append(job_a)
        mlog = os.path.join(root, "ftmaster.log")
        master = subprocess.Popen([args.ftmaster, "run", "--job", job_a, "--redis", redis.url, "--id", "ctl"],
                                  env=dict(base_env(), FT_REDIS_PASSWORD=redis.password),
                                  stdout=open(mlog, "w"), stderr=subprocess.STDOUT)
        dead = dead_pid()

        def batch(name, ft_job, extra=""):
            """A batch script: what the job sees of its worker, then 2 ranks under libft.so."""
            path = os.path.join(jobs, name + ".sh")
            write_file(path, """#!/bin/sh
pidfile=%(run)s/ftworker.$SLURM_JOB_ID.pid
if [ -s "$pidfile" ]; then
  pid=$(cat "$pidfile")
  echo "worker_pid=$pid"
  echo "worker_exe=$(readlink /proc/$pid/exe)"
  echo "worker_uid=$(awk '/^Uid:/ {print $2}' /proc/$pid/status)"
  echo "worker_cmdline=$(tr '\\0' ' ' < /proc/$pid/cmdline)"
  %(python)s - <<'EOF' > %(jobs)s/metrics-$SLURM_JOB_ID.txt
import re, time, urllib.request
text = ""
for _ in range(100):
    try:
        text = urllib.request.urlopen("http://127.0.0.1:%(mport)d/metrics", timeout=2).read().decode()
        if re.search(r"^ft_worker_redis_connected[{].*[}] 1$", text, re.M):
            break
    except OSError:
        pass
    time.sleep(0.1)
print(text)
EOF
else
  echo "no_worker"
fi
%(extra)s
%(ftjob)s
export FT_CKPT_EVERY=5 MASTER_ADDR=127.0.0.1 MASTER_PORT=%(port)d
srun -n 2 --export=ALL,LD_PRELOAD=%(libft)s %(trainsim)s --steps 20 --compute-ms 50 --param-bytes 256kb --ft restore
""" % {"run": run, "python": python, "jobs": jobs, "mport": metrics_port, "extra": extra,
       "ftjob": ("export FT_JOB=%s" % ft_job) if ft_job else "", "port": free_port(),
       "libft": args.libft, "trainsim": args.trainsim}, 0o755)
            return path

        def submit(script, comment):
            a = ["--uid=nobody", "--gid=%d" % user.pw_gid, "-n", "2", "-D", jobs, "-o", os.path.join(jobs, "job-%j.out")]
            if comment is not None:
                a.append("--comment=" + comment)
            return slurm.submit(script, a)

        def job_out(jobid):
            return read(os.path.join(jobs, "job-%s.out" % jobid))

        def kv(out, key):
            m = re.search(r"^%s=(.*)$" % key, out, re.M)
            return m.group(1).strip() if m else None

        def ranks_of(job):
            return {int(r): json.loads(v) for r, v in _pairs(redis_cmd("HGETALL", "ft:{%s}:ranks" % job))}

        def redis_cmd(*a):
            with redis.client() as c:
                return c.command(*a)

        def check_ran(jobid, job, what):
            """The job's worker ran as nobody during the job, adopted its ranks, which restored
            from its plan; it is gone after the epilog."""
            state, ec = slurm.wait_done(jobid)
            out = job_out(jobid)
            check(state == "COMPLETED" and ec == "0:0", "%s: job %s ended %s %s:\n%s\n%s" %
                  (what, jobid, state, ec, out[-2000:], read(os.path.join(logd, "ftworker.%s.log" % jobid))[-2000:]))
            check(len(re.findall(r"trainsim rank=\d+ .*checksum=", out)) == 2, "%s: two ranks' checksums:\n%s" % (what, out))
            pid = kv(out, "worker_pid")
            check(pid is not None, "%s: no worker pid file during the job:\n%s" % (what, out))
            check((kv(out, "worker_exe") or "").endswith("/ftworker"), "%s: pid %s is not ftworker: %s"
                  % (what, pid, kv(out, "worker_exe")))
            check(kv(out, "worker_uid") == str(user.pw_uid), "%s: the worker runs as uid %s, not the job's (%d)"
                  % (what, kv(out, "worker_uid"), user.pw_uid))
            cl = kv(out, "worker_cmdline")
            check(cl == "%s --job %s" % (args.ftworker, job), "%s: the worker's command line: %r" % (what, cl))
            check(redis.password not in out, "%s: the Redis password is visible in the job's output" % what)
            metrics = read(os.path.join(jobs, "metrics-%s.txt" % jobid))
            check(re.search(r'^ft_worker_redis_connected\{[^}]*job="%s"[^}]*\} 1$' % re.escape(job), metrics, re.M),
                  "%s: the worker's /metrics did not answer with Redis connected:\n%s" % (what, metrics[:800]))
            ranks = ranks_of(job)
            check(sorted(ranks) == [0, 1] and all(r.get("node") == socket.gethostname() for r in ranks.values()),
                  "%s: the worker did not adopt both ranks: %r" % (what, ranks))
            check(all(r.get("restored_step") == -1 for r in ranks.values()),
                  "%s: the ranks did not restore from the worker's plan: %r" % (what, ranks))
            check(not os.path.exists("/proc/%s" % pid) or not read("/proc/%s/cmdline" % pid).startswith(args.ftworker),
                  "%s: the worker (pid %s) still runs after the epilog" % (what, pid))
            check(not os.path.exists(os.path.join(run, "ftworker.%s.pid" % jobid)), "%s: the pid file is left" % what)
            wlog = os.path.join(logd, "ftworker.%s.log" % jobid)
            st = os.stat(wlog)
            check(st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o640, "%s: the log is not root's 0640" % what)
            text = read(wlog)
            check(redis.password not in text, "%s: the Redis password is in the worker's log" % what)
            check("ftworker pid %s stopped" % pid in text, "%s: the epilog did not stop the worker:\n%s"
                  % (what, text[-1500:]))
            return text

        # Job A: named by its comment (ft:NAME, FT_JOB set in the script), a master on the
        # "control host", a local disk tier: when it finished, nothing of it stays in /dev/shm.
        t0 = time.monotonic()
        ja = submit(batch("a", job_a), "ft:" + job_a)
        text = check_ran(ja, job_a, "job A")
        # The master marks the job finished once it has read every rank's clean exit, which a
        # loaded host's master may do after the epilog returned.
        if not wait_for(lambda: redis_cmd("HGET", "ft:{%s}:master" % job_a, "job_state") == "finished", 15,
                        "the master to say job A finished", fatal=False):
            fail("timed out after 15 s waiting for the master to say job A finished (job_state %r)\n"
                 "---- the master's log\n%s\n---- the worker's log\n%s"
                 % (redis_cmd("HGET", "ft:{%s}:master" % job_a, "job_state"), read(mlog)[-3000:], text[-4000:]))
        left = shm_files(job_a)
        check(not left, "job A finished, its files are left in /dev/shm: %s\n%s" % (left, text[-2000:]))
        steps = os.listdir(os.path.join(ckpt, job_a)) if os.path.isdir(os.path.join(ckpt, job_a)) else []
        check(steps, "job A: no step in the local tier (the arenas were never persisted?)")
        log("job A %s (%s): worker as nobody, metrics answered, ranks adopted and restored; after the "
            "epilog nothing in /dev/shm (tier holds %s) [%.1f s]" % (ja, job_a, sorted(steps), time.monotonic() - t0))

        # Job B: named by its Slurm id (comment "ft"), no master; the script leaves what a crash
        # leaves (a dead rank's segment, a python/ft stack file) and another job's segment.
        t0 = time.monotonic()
        other = "/dev/shm/ft.deploy-other-%s.r0.p%d" % (tag, dead)
        planted.append(other)
        plant = ('touch /dev/shm/ft.$SLURM_JOB_ID.r7.p%d /dev/shm/ft-pystack.%d %s'
                 % (dead, dead, other))
        jb = submit(batch("b", None, plant), "ft")
        jobnames.append(jb)
        text = check_ran(jb, jb, "job B")
        check(os.path.exists(other), "job B's epilog removed another job's segment %s" % other)
        check(not os.path.exists("/dev/shm/ft-pystack.%d" % dead), "job B: a dead process's ft-pystack file is left")
        left = shm_files(jb)
        arenas = ["/dev/shm/ft-ckpt.%s.0" % jb, "/dev/shm/ft-ckpt.%s.1" % jb]
        check(left == arenas, "job B (not finished: no master) must keep exactly its two arenas for a requeue, "
              "and nothing else: %s\n%s" % (left, text[-2000:]))
        check("kept /dev/shm/ft-ckpt.%s.0" % jb in text, "job B: gc's verdict is not in the log:\n%s" % text[-1500:])
        log("job B %s: dead rank's segment, plan files and stack file removed, arenas kept (gc), "
            "another job's file untouched [%.1f s]" % (jb, time.monotonic() - t0))

        # Job C: the same with ft_arenas=purge: the arenas go too.
        t0 = time.monotonic()
        write_conf(ft_arenas="purge")
        jc = submit(batch("c", None), "ft")
        jobnames.append(jc)
        text = check_ran(jc, jc, "job C")
        left = shm_files(jc)
        check(not left, "job C (ft_arenas=purge): files left in /dev/shm: %s\n%s" % (left, text[-1500:]))
        log("job C %s: ft_arenas=purge removed the arenas too [%.1f s]" % (jc, time.monotonic() - t0))

        # Job D: no ft in its comment: no worker, no log.
        t0 = time.monotonic()
        script = os.path.join(jobs, "d.sh")
        write_file(script, "#!/bin/sh\nif [ -e %s/ftworker.$SLURM_JOB_ID.pid ]; then echo worker; else echo no_worker; fi\n"
                   % run, 0o755)
        jd = submit(script, "just a job")
        state, ec = slurm.wait_done(jd)
        check(state == "COMPLETED" and job_out(jd).strip() == "no_worker", "job D: %s %s %r" % (state, ec, job_out(jd)))
        check(not os.path.exists(os.path.join(logd, "ftworker.%s.log" % jd)), "job D: a worker log was made")
        log("job D %s: no ft in its comment, no worker [%.1f s]" % (jd, time.monotonic() - t0))
        log("PASS slurm")
    finally:
        slurm.stop()
        if master is not None and master.poll() is None:
            master.terminate()
            master.wait(timeout=10)
        redis.stop()
        for f in planted:
            try:
                os.unlink(f)
            except OSError:
                pass
        for j in jobnames:
            remove_job_files(j)
        if os.environ.get("FT_TEST_KEEP") is None:
            shutil.rmtree(root, ignore_errors=True)
        else:
            log("kept %s" % root)


def _pairs(flat):
    flat = flat or []
    return list(zip(flat[0::2], flat[1::2]))


def main():
    p = argparse.ArgumentParser()
    for name in ("launch", "trainsim", "libft", "ftworker", "ftmaster"):
        p.add_argument("--" + name, required=True)
    p.add_argument("--case", required=True, choices=["kubernetes", "kubernetes-run", "systemd", "slurm"])
    args = p.parse_args()
    for name in ("launch", "trainsim", "libft", "ftworker", "ftmaster"):
        setattr(args, name, os.path.abspath(getattr(args, name)))
    {"kubernetes": case_kubernetes, "kubernetes-run": case_kubernetes_run, "systemd": case_systemd,
     "slurm": case_slurm}[args.case](args)
    if args.case == "kubernetes":
        log("PASS kubernetes")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The folder layering of cmake/layers.txt, checked over every `#include "..."` line.

Each rule names a folder, the targets built there, what the folder's files may include and what
its targets may link (CMake checks the links at configure time, cmake/Layers.cmake). A file
belongs to the longest rule folder its directory lies in; an include names a file, which belongs
to a folder the same way. A folder may always include its own files; anything else must be
named by the rule: a folder (its own files, not its subfolders'), or a file (shell patterns such
as preload/*.def). `*` allows everything (leaves: tests/, bench/, python/).

  check_layers.py [--root DIR] [--layers FILE]   exit 1 and one line per violation
  check_layers.py --graph                        what each folder includes now, by folder
"""
import argparse
import fnmatch
import os
import re
import subprocess
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
SOURCES = ('.cc', '.h', '.cu', '.cuh', '.cpp', '.c', '.def')


def parse_layers(path):
    """folder -> (targets, allowed include entries, allowed links); line numbers for errors."""
    rules = {}
    with open(path, encoding='utf-8') as f:
        for n, raw in enumerate(f, 1):
            line = raw.split('#', 1)[0].strip()
            if not line:
                continue
            m = re.match(r'^(\S+?)/?\s*(?:\[([^\]]*)\])?\s*:(.*)$', line)
            if not m:
                sys.exit(f'{path}:{n}: not "folder [targets]: includes | links": {raw.rstrip()}')
            folder, targets, rest = m.group(1), m.group(2) or '', m.group(3)
            includes, _, links = rest.partition('|')
            if folder in rules:
                sys.exit(f'{path}:{n}: {folder} has two rules')
            rules[folder] = (targets.split(), [e.rstrip('/') for e in includes.split()], links.split(), n)
    return rules


def owner(path, folders):
    """The rule folder a repository path belongs to: the longest folder it lies in."""
    best = None
    d = os.path.dirname(path)
    for folder in folders:
        if folder == '.' or d == folder or d.startswith(folder + '/'):
            if best is None or best == '.' or len(folder) > len(best):
                best = folder
    return best


def tracked_sources(root):
    """The sources git knows or would add (ignored build folders left out); a walk without git."""
    try:
        out = subprocess.run(['git', '-C', root, 'ls-files', '-z', '--cached', '--others', '--exclude-standard'],
                             capture_output=True, check=True).stdout
        paths = sorted(set(out.decode().split('\0')))
    except (OSError, subprocess.CalledProcessError):
        paths = []
        for d, dirs, files in os.walk(root):
            dirs[:] = [x for x in dirs if not x.startswith(('.', 'build'))]
            paths += [os.path.relpath(os.path.join(d, f), root) for f in files]
    return [p for p in paths if p.endswith(SOURCES) and os.path.isfile(os.path.join(root, p))]


def includes_of(root, path):
    with open(os.path.join(root, path), encoding='utf-8', errors='replace') as f:
        for n, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if m:
                yield n, m.group(1)


def resolve(root, path, name):
    """Repository path of an include: next to the file if it is there, else from the root."""
    local = os.path.normpath(os.path.join(os.path.dirname(path), name))
    if os.path.exists(os.path.join(root, local)):
        return local
    return os.path.normpath(name)


def allowed(entries, target, target_folder):
    for e in entries:
        if e == '*' or e == target_folder or fnmatch.fnmatchcase(target, e):
            return True
    return False


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--root', default=os.path.dirname(here))
    ap.add_argument('--layers', default=None)
    ap.add_argument('--graph', action='store_true')
    args = ap.parse_args()
    layers = args.layers or os.path.join(args.root, 'cmake', 'layers.txt')
    rules = parse_layers(layers)
    folders = list(rules)
    bad = []
    graph = {}
    checked = 0
    for path in tracked_sources(args.root):
        src = owner(path, folders)
        if src is None:
            bad.append(f'{path}: its folder has no rule in {os.path.relpath(layers, args.root)}')
            continue
        for n, name in includes_of(args.root, path):
            target = resolve(args.root, path, name)
            dst = owner(target, folders)
            checked += 1
            if dst == src:
                continue
            graph.setdefault(src, set()).add(target if dst is None else dst)
            if dst is None and '*' in rules[src][1]:
                continue
            if dst is None:
                bad.append(f'{path}:{n}: includes "{name}", which lies in no folder of {os.path.relpath(layers, args.root)}')
            elif not allowed(rules[src][1], target, dst):
                bad.append(f'{path}:{n}: includes "{name}" ({dst}/), which {src}/ may not use '
                           f'(rule at {os.path.relpath(layers, args.root)}:{rules[src][3]}; the folder\'s README says what it may use)')
    if args.graph:
        for src in sorted(graph):
            print(f'{src}: {" ".join(sorted(graph[src]))}')
        return 0
    for line in bad:
        print(line)
    print(f'layers: {checked} includes in {len(folders)} folders checked, {len(bad)} violations')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())

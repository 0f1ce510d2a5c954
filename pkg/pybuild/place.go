package pybuild

// placeBootstrap is the Python a packaged provider's launcher runs first, before any import that
// may read bytecode (CPython starts with -B and no pycache_prefix, so what it imports while starting
// comes from the interpreter's own __pycache__, as for any Python program). It chooses where this
// launch keeps bytecode and rebuilt extensions, checked at every launch, from two places: the one
// the shell script passes (CACHE/oprov-python, CACHE being XDG_CACHE_HOME or ~/.cache), then
// $TMPDIR/oprov-python-UID. A place counts only when _oprov_safe says so: a directory of this user
// alone, reached from / through directories in which no other user can put or replace an entry.
// Bytecode goes to the first such place whose pycache directory is this user's (_oprov_own);
// with none, the launch says so on stderr and runs with bytecode neither written nor read (the
// prefix is under /dev/null, where no file can exist). Bytecode is never read from a place that
// was refused: the prefix is set only here, after the check. The extensions (deltaBootstrap) take
// the same places through _oprov_places.
//
// Each check is a few lstat calls, in this process: no program is started for it.
// (No single quote: it stands inside the shell script's single quotes.)
const placeBootstrap = `import os, stat
def _oprov_safe(p, hops=0):
    # Whether p (absolute, no ..) is a directory of this user (owner, writable by no one else;
    # made 0700 where missing), reached from / through
    # directories owned by root or this user that no one else can write, or that are sticky: each
    # entry on the way is owned by root or this user. A symlink on the way counts as such an
    # entry; its target is then checked the same way.
    me, parts = os.geteuid(), p.split("/")
    if p[:1] != "/" or ".." in parts or hops > 8:
        return False
    parts = [c for c in parts if c and c != "."]
    try:
        cur, st = "", os.lstat("/")
        for i, c in enumerate(parts):
            if not stat.S_ISDIR(st.st_mode) or st.st_uid not in (0, me) or st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
                return False
            nxt = cur + "/" + c
            try:
                st = os.lstat(nxt)
            except FileNotFoundError:
                try:
                    os.mkdir(nxt, 0o700)
                except FileExistsError:
                    pass
                st = os.lstat(nxt)
            if st.st_uid not in (0, me):
                return False
            if stat.S_ISLNK(st.st_mode):
                t = os.readlink(nxt).split("/")
                base = "" if t[0] == "" else cur
                while t and t[0] in ("..", ".", ""):
                    if t[0] == "..":
                        base = base.rpartition("/")[0]
                    t = t[1:]
                return _oprov_safe("/".join([base] + t + parts[i + 1:]) or "/", hops + 1)
            cur = nxt
        return stat.S_ISDIR(st.st_mode) and st.st_uid == me and not st.st_mode & 0o022
    except OSError:
        return False
def _oprov_own(p):
    # Whether p, in a place _oprov_safe accepted, is a directory (not a link) of this user that
    # no one else can write; made 0700 when missing, and closed to others when only they may
    # read it (CPython makes the directories in it with the umask: none may be reachable).
    try:
        os.mkdir(p, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return False
    try:
        st = os.lstat(p)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
            return False
        if st.st_mode & 0o077:
            os.chmod(p, 0o700)
        return True
    except OSError:
        return False
_oprov_cands = [sys.argv.pop(1) + "/oprov-python", os.path.join(os.environ.get("TMPDIR") or "/tmp", "oprov-python-%d" % os.geteuid())]
def _oprov_places():
    for p in _oprov_cands:
        if _oprov_safe(p):
            yield p
for _p in _oprov_places():
    if _oprov_own(_p + "/pycache"):
        sys.pycache_prefix = _p + "/pycache"
        sys.dont_write_bytecode = False
        break
else:
    sys.pycache_prefix = "/dev/null/oprov-no-bytecode"
    print(sys.argv[0] + ": no directory of this user alone for bytecode (" + " nor ".join(_oprov_cands) + "): running without it (set XDG_CACHE_HOME or TMPDIR to a directory of yours no one else can write)", file=sys.stderr, flush=True)
`

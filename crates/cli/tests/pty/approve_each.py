"""Runs a command in a pseudo-terminal and answers `y` to every approval prompt toolgate shows.

usage: approve_each.py SECONDS COMMAND [ARGS...]
Prints what the terminal showed, then a last line `approved: N`, and exits with the command's
exit code, or 99 (after killing it) if it has not ended within SECONDS.
"""
import os, pty, select, sys, time

seconds, argv = float(sys.argv[1]), sys.argv[2:]
pid, fd = pty.fork()
if pid == 0:
    os.execvp(argv[0], argv)

seen = b""
answered = 0
deadline = time.time() + seconds
ended = False
while time.time() < deadline:
    ready, _, _ = select.select([fd], [], [], 0.2)
    if not ready:
        continue
    try:
        chunk = os.read(fd, 65536)
    except OSError:  # EIO: the child closed the terminal
        chunk = b""
    if not chunk:
        ended = True
        break
    seen += chunk
    # One answer per prompt shown so far.
    while answered < seen.count(b"Allow?"):
        os.write(fd, b"y\n")
        answered += 1
if not ended:
    os.kill(pid, 9)

_, status = os.waitpid(pid, 0)
sys.stdout.write(seen.decode(errors="replace"))
sys.stdout.write(f"\napproved: {answered}\n")
sys.exit(os.waitstatus_to_exitcode(status) if ended else 99)

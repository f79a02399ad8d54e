"""Runs a command in a pseudo-terminal, waits for toolgate's approval prompt, types an answer.

usage: answer.py ANSWER COMMAND [ARGS...]
Prints what the terminal showed, then exits with the command's exit code, or 99 if the prompt
never appeared within 20 seconds.
"""
import os, pty, select, sys, time

answer, argv = sys.argv[1], sys.argv[2:]
pid, fd = pty.fork()
if pid == 0:
    os.execvp(argv[0], argv)

seen = b""
answered = False
deadline = time.time() + 20
while time.time() < deadline:
    ready, _, _ = select.select([fd], [], [], 0.2)
    if not ready:
        continue
    try:
        chunk = os.read(fd, 4096)
    except OSError:  # EIO: the child closed the terminal
        chunk = b""
    if not chunk:
        break
    seen += chunk
    if not answered and b"Allow?" in seen:
        os.write(fd, answer.encode() + b"\n")
        answered = True
else:
    os.kill(pid, 9)

_, status = os.waitpid(pid, 0)
sys.stdout.write(seen.decode(errors="replace"))
sys.exit(os.waitstatus_to_exitcode(status) if answered else 99)

"""sockpipe.py - what the test's TCP stand-ins share (fault_proxy.py, webc_proxy.py): copy one socket
into another until either end closes, then shut both, so that each side sees the other's close."""
import socket


def pipe(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            b.sendall(d)
    except OSError:
        pass
    for s in (a, b):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

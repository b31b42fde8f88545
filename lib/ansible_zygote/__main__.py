"""``python -m ansible_zygote`` runs the server (:mod:`ansible_zygote.server`)."""

from ansible_zygote.server import main

main()

"""Simulators the integration tests run the real dra-cpu binaries against.

apiserver: a strict kube-apiserver subset (TLS, bearer tokens, ResourceSlice
list/watch/create/update/delete, nodes and claims get, fault injection).
"""

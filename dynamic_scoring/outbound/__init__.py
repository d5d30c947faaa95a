"""The outbound-request policy: where the hub's probe and the agents may connect, and what they send.

A hub user writes the URLs a DynamicScorer calls and the Secrets it names; the hub and every agent
then make those requests with their own network position and credentials.  The rules that keep that
from reaching or revealing more than the user could already live here, once for both sides: URL rules
and redaction (``urls``), which addresses may be dialled (``addresses``), the transports that resolve
once and connect only to checked addresses (``guarded_transport``), which Secret may go to which
destination (``secret_binding``), bounded decompression of answers (``inflate``) and what a failed
exchange was (``transport_errors``).
"""

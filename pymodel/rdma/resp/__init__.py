"""Golden model of the pipelined responder: one twin per stage, composed by
:class:`pymodel.rdma.resp.responder.ResponderModel`."""

"""The controller: admin changes become metadata records committed through the Raft quorum.

- ``state``: the state machine the quorum's committed entries are applied to (the MetadataImage).
- ``controller``: a controller process, or the controller half of a combined one: the Raft
  driver, the controller listener, and the admin requests it serves once it leads.
- ``handlers``: what the controller listener answers.
"""

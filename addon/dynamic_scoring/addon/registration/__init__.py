"""Registration: the MCA status fields the manager owns, CSR approval, and the agent's hub RBAC."""

"""The deploy ManifestWorks that carry the rendered agent to a managed cluster."""

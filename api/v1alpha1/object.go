package v1alpha1

// ObjectName is the name of the object a Runnable creates on its cluster:
// the template's metadata.name, or else the Runnable's own name.
func ObjectName(template map[string]any, runnableName string) string {
	if md, ok := template["metadata"].(map[string]any); ok {
		if n, _ := md["name"].(string); n != "" {
			return n
		}
	}
	return runnableName
}

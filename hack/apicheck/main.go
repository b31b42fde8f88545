// apicheck: the CRDs and admission policies of config/ as the API server judges them, without a
// cluster. Each CRD goes through apiextensions-apiserver's own validation (structural schema, CEL
// compilation and cost budget); each ValidatingAdmissionPolicy through the type checker the
// controller manager runs (its expressions, message expressions and match conditions against
// the CRDs' schemas).
//
//	cd hack/apicheck && go build -o ../../.local/apicheck . && cd ../.. &&
//	.local/apicheck config/crd/bases/*.yaml -- config/admission/*.yaml
//
// Built against the pinned Kubernetes' libraries (v0.36.3, KUBERNETES_VERSION); a cold build takes
// about 7 minutes on 2 shared cores. A misspelt field under optional selection (.?field) is no type
// error, for this checker as for the API server: tests/unit/test_trainer_api.py looks for those.
package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/yaml"
)

type schemas map[schema.GroupVersionKind]*spec.Schema

func (s schemas) ResolveSchema(gvk schema.GroupVersionKind) (*spec.Schema, error) {
	if out, ok := s[gvk]; ok {
		return out, nil
	}
	return nil, fmt.Errorf("%v: %w", gvk, resolver.ErrSchemaNotFound)
}

func documents(path string) [][]byte {
	data, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	var out [][]byte
	for _, doc := range bytes.Split(data, []byte("\n---\n")) {
		if len(bytes.TrimSpace(doc)) > 0 && bytes.Contains(doc, []byte("kind:")) {
			out = append(out, doc)
		}
	}
	return out
}

// objectMeta: what the API server's published schema says of metadata, for the fields policies read.
func objectMeta() spec.Schema {
	str := *spec.StringProperty()
	strMap := *spec.MapProperty(spec.StringProperty())
	return spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"object"}, Properties: map[string]spec.Schema{
		"name": str, "generateName": str, "namespace": str, "labels": strMap, "annotations": strMap,
		"deletionTimestamp": *spec.DateTimeProperty(), "generation": *spec.Int64Property(),
	}}}
}

func checkCRD(scheme *runtime.Scheme, doc []byte, found schemas, mapper *meta.DefaultRESTMapper) int {
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(doc, &crd); err != nil {
		panic(err)
	}
	scheme.Default(&crd)
	var internal apiextensions.CustomResourceDefinition
	if err := scheme.Convert(&crd, &internal, nil); err != nil {
		panic(err)
	}
	errs := validation.ValidateCustomResourceDefinition(context.Background(), &internal)
	for _, e := range errs {
		fmt.Printf("%s: %v\n", crd.Name, e)
	}
	for _, v := range internal.Spec.Versions {
		// The internal type keeps a schema all versions share at the top.
		validation := internal.Spec.Validation
		if v.Schema != nil {
			validation = v.Schema
		}
		structural, err := structuralschema.NewStructural(validation.OpenAPIV3Schema)
		if err != nil {
			fmt.Printf("%s %s: %v\n", crd.Name, v.Name, err)
			continue
		}
		openapi := structural.ToKubeOpenAPI()
		openapi.Properties["metadata"] = objectMeta()
		gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
		found[gvk] = openapi
		scope := meta.RESTScopeNamespace
		if crd.Spec.Scope == apiextensionsv1.ClusterScoped {
			scope = meta.RESTScopeRoot
		}
		mapper.AddSpecific(gvk, gvk.GroupVersion().WithResource(crd.Spec.Names.Plural),
			gvk.GroupVersion().WithResource(crd.Spec.Names.Singular), scope)
	}
	return len(errs)
}

func checkPolicy(checker *validating.TypeChecker, doc []byte) int {
	var policy admissionv1.ValidatingAdmissionPolicy
	if err := yaml.Unmarshal(doc, &policy); err != nil {
		panic(err)
	}
	if policy.Kind != "ValidatingAdmissionPolicy" {
		return 0
	}
	problems := 0
	ctx := checker.CreateContext(&policy)
	for i, c := range policy.Spec.MatchConditions {
		if results := checker.CheckExpression(ctx, c.Expression); len(results) != 0 {
			fmt.Printf("%s matchConditions[%d]: %s\n", policy.Name, i, results)
			problems++
		}
	}
	for _, w := range checker.Check(&policy) {
		fmt.Printf("%s %s: %s\n", policy.Name, w.FieldRef, w.Warning)
		problems++
	}
	return problems
}

func main() {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{apiextensionsv1.AddToScheme, apiextensions.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
	found := schemas{}
	mapper := meta.NewDefaultRESTMapper(nil)
	checker := &validating.TypeChecker{SchemaResolver: found, RestMapper: mapper}
	problems, crds, policies, inPolicies := 0, 0, 0, false
	for _, arg := range os.Args[1:] {
		if arg == "--" {
			inPolicies = true
			continue
		}
		for _, doc := range documents(arg) {
			if inPolicies {
				problems += checkPolicy(checker, doc)
				if strings.Contains(string(doc), "kind: ValidatingAdmissionPolicy\n") {
					policies++
				}
			} else {
				problems += checkCRD(scheme, doc, found, mapper)
				crds++
			}
		}
	}
	fmt.Printf("%d CRDs, %d policies, %d problems\n", crds, policies, problems)
	if problems > 0 {
		os.Exit(1)
	}
}

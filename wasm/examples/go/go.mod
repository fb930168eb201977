module example.com/acpflow-policy

go 1.21

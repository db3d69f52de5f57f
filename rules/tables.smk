# Tables over every dataset of the run, combined from the per-dataset tables each paper's stage writes
# (results/tables/<paper>/<dataset>/…, kept whatever later runs do) and registered in the report. One rule per
# paper, generated from the combined_tables() declarations in the stage files (rules/common.smk).


for paper, tables in COMBINED_TABLES.items():
    if not tables["files"]:
        continue

    rule:
        name:
            f"tables_{paper}"
        input:
            [f"results/tables/{paper}/{d}/{name}" for name, ds in tables["files"].items() for d in ds],
        output:
            **{
                name.replace(".", "_"): report(
                    f"results/tables/{paper}/{name}",
                    caption=f"../report/{paper}/{Path(name).stem}.rst",
                    category=tables["category"],
                    subcategory="Tables",
                    labels={"table": name},
                )
                for name in tables["files"]
            },
        log:
            f"logs/tables/{paper}.log",
        benchmark:
            f"benchmarks/tables/{paper}.tsv"
        localrule: True
        conda:
            "../envs/attnaudit.yaml"
        params:
            tables=as_json(tables["files"]),
            out_dir=lambda wc, output: Path(output[0]).parent,
        shell:
            "python -m attnaudit tables combine --out-dir {params.out_dir:q} --tables {params.tables:q} > {log:q} 2>&1"

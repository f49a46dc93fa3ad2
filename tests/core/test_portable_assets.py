"""memexp.core.schema.portable_assets: records and labels name a shipped asset the same on every machine."""

from memexp.core.schema import ASSETS_DIR, asset_path, portable_assets


def test_asset_paths_become_the_yaml_form_that_resolves_back_to_them():
    record = {"pretrained": str(ASSETS_DIR / "tiny_llama_niah"), "steps": 3,
              "stages": [{"adapter": str(ASSETS_DIR / "tiny_gdn_words_lora" / "notebank") + "/"}, None]}
    assert portable_assets(record) == {"pretrained": "${memexp_asset:tiny_llama_niah}", "steps": 3,
                                       "stages": [{"adapter": "${memexp_asset:tiny_gdn_words_lora/notebank}"}, None]}
    assert asset_path("tiny_llama_niah") == record["pretrained"]


def test_another_installs_assets_and_other_paths():
    assert portable_assets("/opt/x/memexp/assets/tiny_gdn") == "${memexp_asset:tiny_gdn}"
    for kept in ("/data/memexp_assets/tiny_gdn", "outputs/train/tiny_gdn", "memexp/assets/tiny_gdn", "/tmp/tg_f"):
        assert portable_assets(kept) == kept
